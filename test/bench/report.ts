/** The benchmark's results: what one run on one server measured, the table, and issue 17's floors; the stream mode's levels. */
import { fmtInt, lpad, pad, round } from "./common.ts"
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

/** One level of the stream mode (streamMode.ts): counts over its window, or since the level before. */
export interface StreamLevel {
  readonly asked: number
  readonly held: number
  readonly openSeconds: number
  readonly windowSeconds: number
  readonly events: number
  readonly eventsPerSecond: number
  /** Trades the feed made of the three pairs a second (a late emulator makes fewer than 2 a second each). */
  readonly ticksPerSecond: number
  readonly idealPerSecond: number
  readonly lagMs: { readonly p50: number; readonly p99: number; readonly max: number }
  readonly snapshots: number
  readonly heartbeats: number
  readonly idsOutOfOrder: number
  readonly readerLoopDelayMs: { readonly p99: number; readonly max: number }
  readonly readersRunQueueWait: number
  readonly serviceCpuCores: number
  readonly serviceRunQueueWait: number
  readonly readersCpuCores: number
  readonly emulatorsCpuCores: number
  readonly rssMiB: number
  readonly rssAboveIdleMiB: number
  readonly peakRssAboveIdleMiB: number
  readonly closedByService: number
  readonly unserved: number
  readonly refused: Readonly<Record<string, number>>
  readonly coinGeckoCalls: number
  /** The service's own counts: streams open at the window's end, events written a second, closed for lagging since its start. */
  readonly hub: { readonly open: number; readonly eventsPerSecond: number; readonly closedLagging: number }
  readonly loadAverage1m: number
}

export const printStreamTable = (
  rows: ReadonlyArray<StreamLevel>,
  o: {
    readonly notes: string
    readonly afterClose: { readonly open: number; readonly rssAboveIdleMiB: number }
    readonly goal: { readonly streams: number; readonly lagP99Ms: number; readonly rssAboveIdleMB: number }
  }
) => {
  const header = ["streams asked", "held", "events/s (ideal)", "lag p50 / p99 / max ms", "service CPU (waited)", "RSS above idle MiB (end, peak)", "closed by service", "unserved", "CoinGecko calls", "readers CPU (waited; loop delay p99, max ms)", "load"]
  const table = rows.map((r) => [
    fmtInt(r.asked),
    `${fmtInt(r.held)} (${round((100 * r.held) / r.asked, 1)} %)`,
    `${fmtInt(r.eventsPerSecond)} (${fmtInt(r.idealPerSecond)})`,
    `${r.lagMs.p50} / ${r.lagMs.p99} / ${r.lagMs.max}`,
    `${r.serviceCpuCores.toFixed(2)} (${r.serviceRunQueueWait.toFixed(2)})`,
    `${r.rssAboveIdleMiB} (${r.peakRssAboveIdleMiB})`,
    fmtInt(r.closedByService),
    r.unserved === 0 ? "0" : `${fmtInt(r.unserved)} ${JSON.stringify(r.refused)}`,
    fmtInt(r.coinGeckoCalls),
    `${r.readersCpuCores.toFixed(2)} (${r.readersRunQueueWait.toFixed(2)}; ${r.readerLoopDelayMs.p99}, ${r.readerLoopDelayMs.max})`,
    r.loadAverage1m.toFixed(2)
  ])
  const widths = header.map((h, c) => Math.max(h.length, ...table.map((r) => r[c]!.length)))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.map((cell, c) => cell.padEnd(widths[c]!)).join(" | ")} |\n`
  process.stdout.write(`\n${line(header)}${line(widths.map((w) => "-".repeat(w)))}${table.map(line).join("")}${o.notes}\n`)
  process.stdout.write(
    `the service's own counts (metrics): ${rows.map((r) => `${fmtInt(r.asked)}: ${fmtInt(r.hub.open)} open, ${fmtInt(r.hub.eventsPerSecond)} events written/s, ${r.hub.closedLagging} closed for lagging`).join("; ")}; ` +
      `5 s after every stream closed: ${o.afterClose.open} open, RSS ${o.afterClose.rssAboveIdleMiB} MiB above idle\n`
  )
  const { goal } = o
  const top = rows.find((r) => r.asked === goal.streams)
  if (top === undefined) return void process.stdout.write(`goal (${fmtInt(goal.streams)} held, lag p99 ≤ ${goal.lagP99Ms} ms, RSS ≤ ${goal.rssAboveIdleMB} MB above idle): not measured (no ${fmtInt(goal.streams)} level)\n`)
  const rssMB = round((top.peakRssAboveIdleMiB * 1_048_576) / 1e6, 1)
  const checks = [
    [`${fmtInt(top.held)} of ${fmtInt(goal.streams)} held`, top.held === goal.streams],
    [`lag p99 ${top.lagMs.p99} ms ≤ ${goal.lagP99Ms}`, top.lagMs.p99 <= goal.lagP99Ms],
    [`peak RSS ${rssMB} MB above idle ≤ ${goal.rssAboveIdleMB}`, rssMB <= goal.rssAboveIdleMB]
  ] as const
  process.stdout.write(`goal: ${checks.map(([text, ok]) => `${text} ${ok ? "ok" : "MISSED"}`).join("; ")} → ${checks.every(([, ok]) => ok) ? "met" : "NOT met"}\n`)
}
