/** The benchmark's results: what one run on one server measured, the table, and issue 17's floors. */
import { fmtInt, lpad, pad } from "./common.ts"
import { FLOOR_VS_FASTIFY, P99_CEILING_MS, type ScenarioDef } from "./scenarios.ts"
import type { WrkResult } from "./wrk.ts"

export type ServerName = "service" | "baseline" | "fastify"

export interface Measured {
  readonly wrk: WrkResult
  readonly peakRssMiB: number
  readonly rssBeforeMiB: number
  /** Server CPU time (user + system) per request over the measured run: robust to other load on the machine. */
  readonly cpuUsPerRequest: number
  /** Share of one core the server used during the measured run. */
  readonly cpuUtilisation: number
  /** 1-minute load average when the run started. */
  readonly loadAverage1m: number
  readonly statusCheck: "ok" | string
}

export interface ScenarioResult {
  readonly name: string
  readonly label: string
  readonly method: string
  readonly path: string
  readonly requestBody?: string
  readonly expectStatus: number
  readonly service: Measured
  readonly baseline?: Measured
  readonly fastify?: Measured
  /** Service req/s / raw node req/s. */
  readonly ratioRps?: number
  /** Service CPU per request / raw node CPU per request. */
  readonly ratioCpuPerRequest?: number
  /** Service req/s / Fastify req/s. */
  readonly ratioRpsFastify?: number
  /** Service CPU per request / Fastify CPU per request. */
  readonly ratioCpuPerRequestFastify?: number
  readonly upstreamCallsDuringRun: number
}

export const statusCheck = (scenario: ScenarioDef, wrk: WrkResult) => {
  const transport = wrk.errors.connect + wrk.errors.read + wrk.errors.write + wrk.errors.timeout
  const non2xx = wrk.errors.status // wrk counts statuses > 399
  const problems: Array<string> = []
  if (transport > 0) problems.push(`socket errors ${JSON.stringify({ ...wrk.errors, status: undefined })}`)
  if (scenario.expectStatus < 400 && non2xx > 0) problems.push(`${non2xx} responses >= 400`)
  if (scenario.expectStatus >= 400 && non2xx !== wrk.requests) problems.push(`only ${non2xx}/${wrk.requests} were >= 400`)
  return problems.length === 0 ? "ok" : problems.join("; ")
}

export const ratios = (svc: Measured, other: Measured | undefined) =>
  other === undefined ? undefined : {
    rps: Math.round((svc.wrk.rps / other.wrk.rps) * 1000) / 1000,
    cpu: Math.round((svc.cpuUsPerRequest / Math.max(0.1, other.cpuUsPerRequest)) * 100) / 100
  }

export const printTable = (results: ReadonlyArray<ScenarioResult>) => {
  const head = `${pad("scenario", 27)}${pad("server", 10)}${lpad("req/s", 10)}${lpad("p50 ms", 9)}${lpad("p99 ms", 9)}${lpad("peak RSS MiB", 14)}${lpad("svc/this", 10)}${
    lpad("CPU µs/req", 12)
  }${lpad("svc/this", 10)}${lpad("CPU", 6)}${lpad("load", 6)}  check`
  const lines = [head, "-".repeat(head.length + 4)]
  for (const r of results) {
    const row = (server: string, m: Measured, ratio?: number, cpuRatio?: number) =>
      `${pad(server === "service" ? r.label : "", 27)}${pad(server, 10)}${lpad(fmtInt(m.wrk.rps), 10)}${lpad(m.wrk.latencyMs.p50.toFixed(2), 9)}${lpad(m.wrk.latencyMs.p99.toFixed(2), 9)}${
        lpad(m.peakRssMiB.toFixed(1), 14)
      }${lpad(ratio === undefined ? "" : ratio.toFixed(3), 10)}${lpad(m.cpuUsPerRequest.toFixed(0), 12)}${lpad(cpuRatio === undefined ? "" : `x${cpuRatio.toFixed(2)}`, 10)}${
        lpad(m.cpuUtilisation.toFixed(2), 6)
      }${lpad(m.loadAverage1m.toFixed(1), 6)}  ${m.statusCheck}`
    lines.push(row("service", r.service))
    if (r.baseline !== undefined) lines.push(row("raw node", r.baseline, r.ratioRps, r.ratioCpuPerRequest))
    if (r.fastify !== undefined) lines.push(row("fastify", r.fastify, r.ratioRpsFastify, r.ratioCpuPerRequestFastify))
  }
  process.stdout.write(`\n${lines.join("\n")}\n`)
}

/** Issue 17's done-when, per scenario: service/raw, service/Fastify and p99 against their floors. */
export const printFloors = (results: ReadonlyArray<ScenarioResult>, defs: ReadonlyArray<ScenarioDef>) => {
  const mark = (ok: boolean) => (ok ? "ok  " : "BELOW")
  const head = `${pad("scenario", 27)}${lpad("svc/raw", 9)}${lpad("floor", 7)}      ${lpad("svc/Fastify", 12)}${lpad("floor", 7)}      ${lpad("svc p99 ms", 11)}${
    lpad("ceiling", 9)
  }      CPU µs/req svc / raw / Fastify`
  const lines = [`issue 17 floors (one run; compare several runs on a shared machine):`, head, "-".repeat(head.length)]
  for (const r of results) {
    const def = defs.find((d) => d.name === r.name)!
    const p99 = r.service.wrk.latencyMs.p99
    const raw = r.ratioRps === undefined ? `${lpad("-", 9)}${lpad("", 7)}      ` : `${lpad(r.ratioRps.toFixed(3), 9)}${lpad(def.floorVsRaw.toFixed(1), 7)} ${mark(r.ratioRps >= def.floorVsRaw)}`
    const fy = r.ratioRpsFastify === undefined
      ? `${lpad("-", 12)}${lpad("", 7)}      `
      : `${lpad(r.ratioRpsFastify.toFixed(3), 12)}${lpad(FLOOR_VS_FASTIFY.toFixed(1), 7)} ${mark(r.ratioRpsFastify >= FLOOR_VS_FASTIFY)}`
    const cpu = [r.service, r.baseline, r.fastify].map((m) => (m === undefined ? "-" : m.cpuUsPerRequest.toFixed(0))).join(" / ")
    lines.push(`${pad(r.label, 27)}${raw}${fy}${lpad(p99.toFixed(2), 11)}${lpad(`< ${P99_CEILING_MS}`, 9)} ${mark(p99 < P99_CEILING_MS)}${lpad("", 1)}${cpu}`)
  }
  process.stdout.write(`\n${lines.join("\n")}\n`)
}
