/**
 * wrk (Debian package `wrk`) driven through a generated Lua script: the request (or a round-robin mix
 * of requests), an optional stop after a number of responses, and a JSON summary on stdout.
 */
import { spawn, spawnSync } from "node:child_process"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { fail, HOST, round } from "./common.ts"
import { pinned, tail, track } from "./processes.ts"
import type { ScenarioDef } from "./scenarios.ts"

export interface WrkResult {
  readonly requests: number
  readonly durationSec: number
  readonly bytes: number
  readonly rps: number
  readonly latencyMs: { readonly mean: number; readonly p50: number; readonly p90: number; readonly p99: number; readonly p999: number; readonly max: number }
  /** `status`: responses with a status above 399 (wrk's count). */
  readonly errors: { readonly connect: number; readonly read: number; readonly write: number; readonly timeout: number; readonly status: number }
}

export interface WrkOptions {
  readonly connections: number
  readonly threads: number
  readonly loadCpus: string | undefined
}

export interface WrkRun {
  readonly port: number
  /** One scenario: wrk's cached request. Several: each connection sends them in turn. */
  readonly scenarios: ReadonlyArray<ScenarioDef>
  readonly seconds: number
  readonly stopAfter?: number
}

const luaString = (text: string) => {
  if (!/^[\x20-\x7e]*$/.test(text)) fail(`only printable ASCII can go into the wrk script: ${text}`)
  return `"${text.replaceAll("\\", "\\\\").replaceAll("\"", "\\\"")}"`
}

const luaHeaders = (headers: Readonly<Record<string, string>>) =>
  `{ ${Object.entries(headers).map(([name, value]) => `[${luaString(name)}] = ${luaString(value)}`).join(", ")} }`

export const wrkScript = (scenarios: ReadonlyArray<ScenarioDef>, stopAfterPerThread?: number) => {
  const lines: Array<string> = []
  const only = scenarios.length === 1 ? scenarios[0]! : undefined
  if (only !== undefined) {
    lines.push(`wrk.method = ${luaString(only.method)}`)
    if (only.body !== undefined) lines.push(`wrk.body = ${luaString(only.body)}`)
    for (const [name, value] of Object.entries(only.headers)) lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`)
  } else {
    // Built on the first call, when wrk.headers holds Host; wrk.format adds Content-Length.
    lines.push("local mix = nil", "local turn = 0", "request = function()", "  if mix == nil then", "    mix = {")
    for (const s of scenarios) {
      lines.push(`      wrk.format(${luaString(s.method)}, ${luaString(s.path)}, ${luaHeaders(s.headers)}, ${s.body === undefined ? "nil" : luaString(s.body)}),`)
    }
    lines.push("    }", "  end", "  turn = turn % #mix + 1", "  return mix[turn]", "end")
  }
  if (stopAfterPerThread !== undefined) {
    // A response callback costs the generator a little; only used for the fixed-count RSS run.
    lines.push(
      "local seen = 0",
      "response = function(status, headers, body)",
      "  seen = seen + 1",
      // wrk's main thread sleeps for -d whatever its threads do: tell the orchestrator, which sends
      // SIGINT (wrk then stops and reports the true duration).
      `  if seen == ${stopAfterPerThread} then io.write("BENCH_LIMIT_REACHED\\n"); io.flush(); wrk.thread:stop() end`,
      "end"
    )
  }
  lines.push(...summaryLines)
  return `${lines.join("\n")}\n`
}

/** wrk's `done`: the run's summary as one `BENCH_JSON {...}` line, which `runScript` reads. */
export const summaryLines = [
  "done = function(summary, latency, requests)",
  "  local e = summary.errors",
  "  io.write(string.format('BENCH_JSON {\"requests\":%.0f,\"duration_us\":%.0f,\"bytes\":%.0f,' ..",
  "    '\"errors\":{\"connect\":%.0f,\"read\":%.0f,\"write\":%.0f,\"status\":%.0f,\"timeout\":%.0f},' ..",
  "    '\"latency_us\":{\"mean\":%.3f,\"max\":%.0f,\"p50\":%.0f,\"p90\":%.0f,\"p99\":%.0f,\"p999\":%.0f}}\\n',",
  "    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,",
  "    latency.mean, latency.max, latency:percentile(50), latency:percentile(90), latency:percentile(99),",
  "    latency:percentile(99.9)))",
  "end"
]

export const runWrk = async (opts: WrkOptions, tmp: string, run: WrkRun): Promise<WrkResult> => {
  const perThread = run.stopAfter === undefined ? undefined : Math.ceil(run.stopAfter / opts.threads)
  const script = join(tmp, `${run.scenarios.map((s) => s.name).join("+")}-${perThread ?? "d"}.lua`)
  writeFileSync(script, wrkScript(run.scenarios, perThread))
  return runScript(opts, script, `http://${HOST}:${run.port}${run.scenarios[0]!.path}`, run.seconds, perThread)
}

/** Runs wrk with a script ending in `summaryLines` against `url` for `seconds` (or until each thread saw `perThread` responses). */
export const runScript = async (opts: WrkOptions, script: string, url: string, seconds: number, perThread?: number): Promise<WrkResult> => {
  const connections = Math.max(opts.connections, opts.threads)
  const argv = pinned(opts.loadCpus, [
    "wrk",
    `-t${opts.threads}`,
    `-c${connections}`,
    `-d${seconds}s`,
    "--timeout",
    "10s",
    "-s",
    script,
    url
  ])
  const child = track(spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] }))
  const out = tail(child.stdout, 65_536)
  const err = tail(child.stderr)
  if (perThread !== undefined) {
    let reached = 0
    child.stdout?.on("data", (chunk: Buffer) => {
      reached += chunk.toString("utf8").split("BENCH_LIMIT_REACHED").length - 1
      if (reached >= opts.threads) child.kill("SIGINT")
    })
  }
  // wrk stops itself after -d; the watchdog only guards against a wedged generator.
  const watchdog = setTimeout(() => child.kill("SIGKILL"), (seconds + 30) * 1000)
  // "close", not "exit": wrk's summary may still be in the pipe when it exits (seen with two wrk runs at once).
  const code = await new Promise<number | null>((done) => child.once("close", (c) => done(c)))
  clearTimeout(watchdog)
  const line = out().split("\n").find((l) => l.startsWith("BENCH_JSON "))
  if (code !== 0 || line === undefined) fail(`wrk failed (exit ${code}):\n${out()}\n${err()}`)
  const raw = JSON.parse(line.slice("BENCH_JSON ".length)) as {
    requests: number
    duration_us: number
    bytes: number
    errors: WrkResult["errors"]
    latency_us: { mean: number; max: number; p50: number; p90: number; p99: number; p999: number }
  }
  const durationSec = raw.duration_us / 1e6
  const ms = (us: number) => round(us / 1000, 3)
  return {
    requests: raw.requests,
    durationSec: round(durationSec, 3),
    bytes: raw.bytes,
    rps: round(raw.requests / durationSec, 1),
    latencyMs: {
      mean: ms(raw.latency_us.mean),
      p50: ms(raw.latency_us.p50),
      p90: ms(raw.latency_us.p90),
      p99: ms(raw.latency_us.p99),
      p999: ms(raw.latency_us.p999),
      max: ms(raw.latency_us.max)
    },
    errors: raw.errors
  }
}

export const wrkVersion = () => {
  const r = spawnSync("wrk", ["-v"], { encoding: "utf8" })
  if (r.error !== undefined) return undefined
  return `${r.stdout}${r.stderr}`.split("\n")[0]?.trim()
}
