/**
 * HTTP benchmark of the service against a raw `node:http` baseline (issue "Performance: a benchmark in
 * the repo"). Run with Node 24 (type stripping), e.g. through npm so that the pinned Node is used:
 *
 *   npm run bench                                      all scenarios, 10 s each, 2 s warm-up
 *   npm run bench -- --duration 5 --scenarios rates    one scenario, 5 s
 *   npm run bench -- --requests 1000000                plus a long RSS run of 1M health requests
 *   npm run bench -- --scenarios rates --cpu-prof      profile the service; prints the top self-time functions
 *
 * Options: --duration S (10)  --warmup S (2)  --connections N (32)  --threads N (1)
 *          --scenarios health,rates,invalid (all)  --requests N  --cpu-prof
 *          --server-cpus LIST (0)  --load-cpus LIST (1)  --access-log PATH (temp file, deleted)
 *          --no-baseline  --out DIR (bench-results)
 *
 * What runs:
 *   - the CoinGecko emulator (test/emulators/coingecko.ts, in this process; a child process if its API is
 *     missing), so no request leaves the machine;
 *   - the service, started as `npm start` starts it (the start script's flags, on node_modules/.bin/node),
 *     as a child on a free port of 127.0.0.1, with the production composition (server.ts: the edge
 *     with its ready answers, access log, bearer, validation). DATA_DIR in a
 *     temp dir, NEWSLETTER_PROVIDER=local (so APP_ENV stays "development": "production" refuses the local
 *     list; it changes nothing else on these paths), and RATE_LIMIT_*_PER_MIN=1e9: every request comes
 *     from 127.0.0.1, and the benchmark measures the hot path, not 429s (the limiter still runs). Its
 *     stdout (one JSON access-log line per request) goes to a file, so logging is paid for but not shown;
 *   - the baseline, test/bench/baseline.ts, a child answering the bytes captured from the service;
 *   - wrk (Debian package `wrk`), 32 connections, a Lua script for method, body and headers and for the
 *     JSON summary; a warm-up run before each measured run.
 * With `taskset` and 2+ CPUs the servers run on --server-cpus and wrk (and this process) on --load-cpus:
 * the numbers are single-core server numbers. Peak RSS: VmHWM of the server (reset before each run
 * through /proc/PID/clear_refs when allowed) and VmRSS polled every 100 ms, whichever is higher.
 * CPU µs/req: the server's user + system time (/proc/PID/stat) over the measured run divided by its
 * requests; unlike req/s it hardly moves when something else shares the machine.
 *
 * --requests N: after the scenarios, N health requests on the service (wrk stops at the count), with
 * RSS before and after a warm-up, a per-second timeline, after the run and after 3 s idle.
 * --cpu-prof: the service runs with `--cpu-prof --cpu-prof-dir=bench-results/prof/<timestamp>`; after it
 * exits, its .cpuprofile is cut to the measured service runs (V8 and process.hrtime share
 * CLOCK_MONOTONIC) and the top 25 functions by self time (name + file:line:column), the share per origin
 * (src/, effect, node:, GC) and our src/ functions by synchronous inclusive time are printed. Profiling
 * slows the service: compare req/s from profiled runs only with each other.
 *
 * Results: a table on stdout, and JSON in bench-results/bench-<timestamp>.json and bench-results/latest.json.
 * Every child is stopped on exit, on error and on SIGINT/SIGTERM; every run is bounded by wrk's -d and by
 * an overall watchdog. Targets are 127.0.0.1 only.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { closeSync, createReadStream, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { request as httpRequest } from "node:http"
import { createServer as createNetServer } from "node:net"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import type { BaselineFixture } from "./baseline.ts"

const HOST = "127.0.0.1"
const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)))
const NODE = existsSync(join(ROOT, "node_modules/.bin/node")) ? join(ROOT, "node_modules/.bin/node") : process.execPath
const HIGH_LIMIT = "1000000000"

// ---------------------------------------------------------------------------------------------------
// Options

interface Options {
  readonly duration: number
  readonly warmup: number
  readonly connections: number
  readonly threads: number
  readonly scenarios: ReadonlyArray<string>
  readonly requests: number | undefined
  readonly cpuProf: boolean
  readonly serverCpus: string | undefined
  readonly loadCpus: string | undefined
  readonly accessLog: string | undefined
  readonly baseline: boolean
  readonly out: string
}

const USAGE = `usage: node test/bench/bench.ts [--duration S] [--warmup S] [--connections N] [--threads N]
  [--scenarios health,rates,invalid] [--requests N] [--cpu-prof] [--server-cpus LIST] [--load-cpus LIST]
  [--access-log PATH] [--no-baseline] [--out DIR]`

const parseOptions = (argv: ReadonlyArray<string>): Options => {
  const values = new Map<string, string>()
  const flags = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--help" || arg === "-h") {
      process.stdout.write(`${USAGE}\n`)
      process.exit(0)
    }
    if (!arg.startsWith("--")) fail(`unexpected argument ${arg}\n${USAGE}`)
    const eq = arg.indexOf("=")
    if (eq !== -1) values.set(arg.slice(2, eq), arg.slice(eq + 1))
    else if (["--cpu-prof", "--no-baseline"].includes(arg)) flags.add(arg.slice(2))
    else {
      const value = argv[++i]
      if (value === undefined) fail(`${arg} needs a value\n${USAGE}`)
      values.set(arg.slice(2), value)
    }
  }
  const known = ["duration", "warmup", "connections", "threads", "scenarios", "requests", "server-cpus", "load-cpus", "access-log", "out"]
  for (const key of values.keys()) if (!known.includes(key)) fail(`unknown option --${key}\n${USAGE}`)
  const int = (name: string, fallback: number | undefined, min: number, max: number) => {
    const raw = values.get(name)
    if (raw === undefined) return fallback
    const n = Number(raw.replace(/s$/, "").replaceAll("_", ""))
    if (!Number.isInteger(n) || n < min || n > max) fail(`--${name} must be an integer in ${min}..${max} (got ${raw})`)
    return n
  }
  const scenarios = (values.get("scenarios") ?? scenarioDefs.map((s) => s.name).join(",")).split(",").map((s) => s.trim()).filter((s) => s !== "")
  for (const s of scenarios) if (!scenarioDefs.some((d) => d.name === s)) fail(`unknown scenario ${s} (${scenarioDefs.map((d) => d.name).join(", ")})`)
  const cpus = availableParallelism()
  const pin = hasTaskset() && cpus >= 2
  return {
    duration: int("duration", 10, 1, 3_600)!,
    warmup: int("warmup", 2, 0, 600)!,
    connections: int("connections", 32, 1, 10_000)!,
    threads: int("threads", 1, 1, 64)!,
    scenarios,
    requests: int("requests", undefined, 1, 100_000_000),
    cpuProf: flags.has("cpu-prof"),
    serverCpus: values.get("server-cpus") ?? (pin ? "0" : undefined),
    loadCpus: values.get("load-cpus") ?? (pin ? (cpus > 2 ? `1-${cpus - 1}` : "1") : undefined),
    accessLog: values.get("access-log"),
    baseline: !flags.has("no-baseline"),
    out: resolve(ROOT, values.get("out") ?? "bench-results")
  }
}

// ---------------------------------------------------------------------------------------------------
// Scenarios

interface ScenarioDef {
  readonly name: string
  readonly label: string
  readonly method: "GET" | "POST"
  readonly path: string
  readonly body?: string
  readonly headers: Readonly<Record<string, string>>
  readonly expectStatus: number
}

const RATES_BODY = JSON.stringify({ cryptos: ["BTC", "ETH", "SOL"], days: 30 })

const scenarioDefs: ReadonlyArray<ScenarioDef> = [
  { name: "health", label: "GET /api/health", method: "GET", path: "/api/health", headers: {}, expectStatus: 200 },
  {
    name: "rates",
    label: "POST exchange-rates (hit)",
    method: "POST",
    path: "/api/v1/exchange-rates",
    body: RATES_BODY,
    headers: { "Content-Type": "application/json" },
    expectStatus: 200
  },
  {
    name: "invalid",
    label: "POST exchange-rates 400",
    method: "POST",
    path: "/api/v1/exchange-rates",
    body: JSON.stringify({ cryptos: [] }),
    headers: { "Content-Type": "application/json" },
    expectStatus: 400
  }
]

/** The service is started as `npm start` starts it: the arguments of package.json's start script after `node`. */
const startArguments = (): Array<string> => {
  const start = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: { start: string } }).scripts.start
  // `exec` makes the shell npm runs the script in become node (SIGTERM reaches it): not part of the command.
  const [command, ...args] = start.trim().replace(/^exec\s+/, "").split(/\s+/)
  if (command !== "node" || !args.includes("src/main.ts")) fail(`package.json start script is not "[exec] node [flags] src/main.ts": ${start}`)
  return args
}

// ---------------------------------------------------------------------------------------------------
// Child processes and clean-up

const children = new Set<ChildProcess>()
const cleanups: Array<() => void> = []
let cleaning = false

function fail(message: string): never {
  throw new BenchError(message)
}
class BenchError extends Error {}

const track = (child: ChildProcess) => {
  children.add(child)
  child.once("exit", () => children.delete(child))
  return child
}

/** SIGTERM, then SIGKILL after `graceMs`. Resolves with the exit code (or signal name). */
const stopChild = (child: ChildProcess, graceMs = 5_000): Promise<number | string | null> =>
  new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done(child.exitCode ?? child.signalCode)
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      done(code ?? signal)
    })
    child.kill("SIGTERM")
  })

/** Synchronous last resort (process "exit" handler): nothing may outlive the benchmark. */
const killAll = () => {
  for (const child of children) {
    try {
      child.kill("SIGKILL")
    } catch { /* already gone */ }
  }
  for (const cleanup of cleanups.splice(0)) {
    try {
      cleanup()
    } catch { /* best effort */ }
  }
}

const shutdown = async (code: number) => {
  if (cleaning) return
  cleaning = true
  await Promise.all([...children].map((child) => stopChild(child, 3_000)))
  killAll()
  process.exit(code)
}

process.on("exit", killAll)
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    process.stderr.write(`\nbench: ${signal}, stopping children\n`)
    void shutdown(130)
  })
}

const hasTaskset = () => spawnSync("taskset", ["-V"], { stdio: "ignore" }).status === 0

/** argv prefixed with `taskset -c cpus` when pinning. */
const pinned = (cpus: string | undefined, argv: ReadonlyArray<string>) => (cpus === undefined ? [...argv] : ["taskset", "-c", cpus, ...argv])

const freePort = (): Promise<number> =>
  new Promise((done, reject) => {
    const server = createNetServer()
    server.once("error", reject)
    server.listen(0, HOST, () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => done(port))
    })
  })

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/** Keeps the last bytes of a stream, for error messages. */
const tail = (stream: NodeJS.ReadableStream | null, max = 16_384) => {
  let text = ""
  stream?.on("data", (chunk: Buffer) => {
    text = (text + chunk.toString("utf8")).slice(-max)
  })
  return () => text
}

// ---------------------------------------------------------------------------------------------------
// HTTP (exact bytes)

interface Captured {
  readonly status: number
  /** Lower-case names in wire order, without Date and hop-by-hop headers. */
  readonly headers: Array<[string, string]>
  readonly body: Buffer
}

const HOP_BY_HOP = new Set(["date", "connection", "keep-alive", "transfer-encoding"])

const call = (
  port: number,
  method: string,
  path: string,
  body?: string,
  headers: Readonly<Record<string, string>> = {},
  timeoutMs = 15_000
): Promise<Captured> =>
  new Promise((done, reject) => {
    const req = httpRequest({ host: HOST, port, method, path, agent: false, timeout: timeoutMs, headers: { ...headers, ...(body === undefined ? {} : { "content-length": Buffer.byteLength(body) }) } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        const pairs: Array<[string, string]> = []
        for (let i = 0; i < res.rawHeaders.length; i += 2) {
          const name = res.rawHeaders[i]!.toLowerCase()
          if (!HOP_BY_HOP.has(name)) pairs.push([name, res.rawHeaders[i + 1]!])
        }
        done({ status: res.statusCode ?? 0, headers: pairs, body: Buffer.concat(chunks) })
      })
      res.on("error", reject)
    })
    req.on("timeout", () => req.destroy(new Error(`timeout: ${method} ${path}`)))
    req.on("error", reject)
    req.end(body)
  })

const waitReady = async (port: number, child: ChildProcess, what: string, stderr: () => string, timeoutMs = 30_000) => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null) fail(`${what} exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${stderr()}`)
    try {
      // Short: a connection accepted before the app's handler is attached is never answered
      // (@effect/platform-node listens while its layer is built and attaches the handler in serve()).
      const res = await call(port, "GET", "/api/health", undefined, {}, 1_000)
      if (res.status === 200) return
    } catch { /* not yet */ }
    await sleep(100)
  }
  fail(`${what} not ready on ${HOST}:${port} within ${timeoutMs} ms:\n${stderr()}`)
}

// ---------------------------------------------------------------------------------------------------
// Memory of a process (Linux /proc)

interface MemSample {
  readonly rssKiB: number
  readonly hwmKiB: number
}

const readMem = (pid: number): MemSample | undefined => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const rss = /^VmRSS:\s+(\d+) kB/m.exec(status)
    const hwm = /^VmHWM:\s+(\d+) kB/m.exec(status)
    if (rss === null || hwm === null) return undefined
    return { rssKiB: Number(rss[1]), hwmKiB: Number(hwm[1]) }
  } catch {
    return undefined
  }
}

/** User + system CPU time of a process in ms (from /proc/PID/stat; clock ticks, usually 10 ms). */
const cpuMs = (pid: number): number | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // Fields after the command name (which may contain spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS
  } catch {
    return undefined
  }
}
const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100

const loadAverage = () => round(loadavg()[0] ?? 0, 2)

/** Resets VmHWM to the current RSS (Linux >= 4.0; needs the right to write clear_refs). */
const resetPeak = (pid: number) => {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5")
    return true
  } catch {
    return false
  }
}

class RssSampler {
  private peakKiB = 0
  private timer: NodeJS.Timeout | undefined
  readonly timeline: Array<readonly [seconds: number, rssMiB: number]> = []
  private readonly t0 = performance.now()
  private lastTimeline = -Infinity
  private readonly pid: number
  private readonly timelineEverySec: number
  constructor(pid: number, timelineEverySec = 0) {
    this.pid = pid
    this.timelineEverySec = timelineEverySec
  }
  start() {
    this.sample()
    this.timer = setInterval(() => this.sample(), 100)
    return this
  }
  private sample() {
    const mem = readMem(this.pid)
    if (mem === undefined) return
    this.peakKiB = Math.max(this.peakKiB, mem.rssKiB)
    const t = (performance.now() - this.t0) / 1000
    if (this.timelineEverySec > 0 && t - this.lastTimeline >= this.timelineEverySec) {
      this.lastTimeline = t
      this.timeline.push([round(t, 1), mib(mem.rssKiB)])
    }
  }
  /** Peak of polled VmRSS and of VmHWM (which catches spikes between polls when it was reset). */
  stop(hwmWasReset: boolean): number {
    this.sample()
    if (this.timer !== undefined) clearInterval(this.timer)
    const mem = readMem(this.pid)
    return Math.max(this.peakKiB, hwmWasReset && mem !== undefined ? mem.hwmKiB : 0)
  }
}

const mib = (kib: number) => round(kib / 1024, 1)
const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits

// ---------------------------------------------------------------------------------------------------
// wrk

interface WrkResult {
  readonly requests: number
  readonly durationSec: number
  readonly bytes: number
  readonly rps: number
  readonly latencyMs: { readonly mean: number; readonly p50: number; readonly p90: number; readonly p99: number; readonly p999: number; readonly max: number }
  readonly errors: { readonly connect: number; readonly read: number; readonly write: number; readonly timeout: number; readonly status: number }
}

const luaString = (text: string) => {
  if (!/^[\x20-\x7e]*$/.test(text)) fail(`only printable ASCII can go into the wrk script: ${text}`)
  return `"${text.replaceAll("\\", "\\\\").replaceAll("\"", "\\\"")}"`
}

const wrkScript = (scenario: ScenarioDef, stopAfterPerThread?: number) => {
  const lines = [`wrk.method = ${luaString(scenario.method)}`]
  if (scenario.body !== undefined) lines.push(`wrk.body = ${luaString(scenario.body)}`)
  for (const [name, value] of Object.entries(scenario.headers)) lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`)
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
  lines.push(
    "done = function(summary, latency, requests)",
    "  local e = summary.errors",
    "  io.write(string.format('BENCH_JSON {\"requests\":%.0f,\"duration_us\":%.0f,\"bytes\":%.0f,' ..",
    "    '\"errors\":{\"connect\":%.0f,\"read\":%.0f,\"write\":%.0f,\"status\":%.0f,\"timeout\":%.0f},' ..",
    "    '\"latency_us\":{\"mean\":%.3f,\"max\":%.0f,\"p50\":%.0f,\"p90\":%.0f,\"p99\":%.0f,\"p999\":%.0f}}\\n',",
    "    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,",
    "    latency.mean, latency.max, latency:percentile(50), latency:percentile(90), latency:percentile(99),",
    "    latency:percentile(99.9)))",
    "end"
  )
  return `${lines.join("\n")}\n`
}

interface WrkRun {
  readonly port: number
  readonly scenario: ScenarioDef
  readonly seconds: number
  readonly stopAfter?: number
}

const runWrk = async (opts: Options, tmp: string, run: WrkRun): Promise<WrkResult> => {
  const perThread = run.stopAfter === undefined ? undefined : Math.ceil(run.stopAfter / opts.threads)
  const script = join(tmp, `${run.scenario.name}-${perThread ?? "d"}.lua`)
  writeFileSync(script, wrkScript(run.scenario, perThread))
  const connections = Math.max(opts.connections, opts.threads)
  const argv = pinned(opts.loadCpus, [
    "wrk",
    `-t${opts.threads}`,
    `-c${connections}`,
    `-d${run.seconds}s`,
    "--timeout",
    "10s",
    "-s",
    script,
    `http://${HOST}:${run.port}${run.scenario.path}`
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
  const watchdog = setTimeout(() => child.kill("SIGKILL"), (run.seconds + 30) * 1000)
  const code = await new Promise<number | null>((done) => child.once("exit", (c) => done(c)))
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

const wrkVersion = () => {
  const r = spawnSync("wrk", ["-v"], { encoding: "utf8" })
  if (r.error !== undefined) return undefined
  return `${r.stdout}${r.stderr}`.split("\n")[0]?.trim()
}

// ---------------------------------------------------------------------------------------------------
// The emulator

interface Upstream {
  readonly url: string
  readonly totalCalls: () => Promise<number>
  readonly close: () => Promise<void>
}

const startUpstream = async (opts: Options): Promise<Upstream> => {
  const mod = (await import("../emulators/coingecko.ts")) as Record<string, unknown>
  const start = mod.startCoinGeckoEmulator
  if (typeof start === "function") {
    const emulator = (await (start as (o: { port: number; host: string }) => Promise<unknown>)({ port: 0, host: HOST })) as {
      url: string
      stats: () => { total: number }
      close: () => Promise<void>
    }
    return { url: emulator.url, totalCalls: async () => emulator.stats().total, close: () => emulator.close() }
  }
  // Fallback: the standalone emulator, which prints its base URL.
  const port = await freePort()
  const argv = pinned(opts.loadCpus, [NODE, join(ROOT, "test/emulators/coingecko.ts"), "--port", String(port)])
  const child = track(spawn(argv[0]!, argv.slice(1), { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] }))
  const out = tail(child.stdout)
  const err = tail(child.stderr)
  const until = Date.now() + 15_000
  while (!out().includes("\n")) {
    if (Date.now() > until || child.exitCode !== null) fail(`CoinGecko emulator did not start:\n${err()}`)
    await sleep(50)
  }
  const url = out().split("\n")[0]!.trim()
  return {
    url,
    totalCalls: async () => JSON.parse((await call(port, "GET", "/__stats")).body.toString("utf8")).total as number,
    close: async () => void (await stopChild(child))
  }
}

// ---------------------------------------------------------------------------------------------------
// CPU profile (.cpuprofile, Chrome DevTools format)

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number; readonly columnNumber: number }
  readonly children?: ReadonlyArray<number>
}
interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

interface HotSpot {
  readonly function: string
  readonly location: string
  readonly selfMs: number
  readonly selfPct: number
  readonly totalMs?: number
  readonly totalPct?: number
}

const shortUrl = (url: string) => {
  if (url === "") return ""
  let path = url.startsWith("file://") ? fileURLToPath(url) : url
  const nm = path.lastIndexOf("/node_modules/")
  if (nm !== -1) return path.slice(nm + "/node_modules/".length)
  if (path.startsWith(ROOT)) path = relative(ROOT, path)
  return path
}

const categoryOf = (name: string, url: string) => {
  if (url === "") return name.startsWith("(") ? name : "(native/V8)"
  if (url.startsWith("src/")) return "src/ (ours)"
  if (url.startsWith("effect/")) return "effect"
  if (url.startsWith("@effect/")) return url.split("/").slice(0, 2).join("/")
  if (url.startsWith("node:")) return "node: internals"
  return url.split("/")[0] ?? url
}

/** Monotonic microseconds: the clock of V8's profile timestamps (CLOCK_MONOTONIC on Linux). */
const monoUs = () => Number(process.hrtime.bigint() / 1000n)

/**
 * Self time per function (name + file + line), inclusive time of our functions, time per origin.
 * With `windows` (monotonic µs), only samples inside them count: the measured runs, not start-up,
 * capture or warm-up. Inclusive time stops at Effect's fiber loop: it is only the synchronous part.
 */
const analyseProfile = (file: string, windows: ReadonlyArray<readonly [number, number]>, top = 25) => {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile
  const byId = new Map(profile.nodes.map((n) => [n.id, n] as const))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const keyOf = (n: ProfileNode) => {
    const url = shortUrl(n.callFrame.url)
    return { name: n.callFrame.functionName || "(anonymous)", location: url === "" ? "" : `${url}:${n.callFrame.lineNumber + 1}:${n.callFrame.columnNumber + 1}`, url }
  }
  const self = new Map<string, { name: string; location: string; url: string; us: number }>()
  const total = new Map<string, number>()
  const byCategory = new Map<string, number>()
  let busyUs = 0
  let idleUs = 0
  const { samples, timeDeltas } = profile
  let t = profile.startTime
  const stamps = timeDeltas.map((d) => (t += d))
  const inWindow = (at: number) => windows.some(([from, to]) => at >= from && at <= to)
  // Only trust the windows if they overlap the profile (same clock); else use everything.
  const windowed = windows.length > 0 && stamps.some(inWindow)
  for (let i = 0; i < samples.length; i++) {
    if (windowed && !inWindow(stamps[i]!)) continue
    const us = (i + 1 < stamps.length ? stamps[i + 1]! : profile.endTime) - stamps[i]!
    const node = byId.get(samples[i]!)
    if (node === undefined || us <= 0) continue
    const k = keyOf(node)
    if (k.name === "(idle)") {
      idleUs += us
      continue
    }
    busyUs += us
    const id = `${k.name} ${k.location}`
    const entry = self.get(id) ?? { ...k, us: 0 }
    entry.us += us
    self.set(id, entry)
    const cat = categoryOf(k.name, k.url)
    byCategory.set(cat, (byCategory.get(cat) ?? 0) + us)
    // Inclusive time: each distinct function on the stack once.
    const seen = new Set<string>()
    for (let cur: number | undefined = node.id; cur !== undefined; cur = parent.get(cur)) {
      const n = byId.get(cur)!
      const kk = keyOf(n)
      const kid = `${kk.name} ${kk.location}`
      if (seen.has(kid)) continue
      seen.add(kid)
      total.set(kid, (total.get(kid) ?? 0) + us)
    }
  }
  const pct = (us: number) => round((100 * us) / Math.max(1, busyUs), 1)
  const hot = (id: string, e: { name: string; location: string; us: number }): HotSpot => ({
    function: e.name,
    location: e.location,
    selfMs: round(e.us / 1000, 1),
    selfPct: pct(e.us),
    totalMs: round((total.get(id) ?? 0) / 1000, 1),
    totalPct: pct(total.get(id) ?? 0)
  })
  const topSelf = [...self.entries()].sort((a, b) => b[1].us - a[1].us).slice(0, top).map(([id, e]) => hot(id, e))
  const ours = [...total.entries()]
    .filter(([id]) => / src\//.test(id))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 20)
    .map(([id, us]) => {
      const e = self.get(id)
      const space = id.indexOf(" src/")
      return {
        function: id.slice(0, space),
        location: id.slice(space + 1),
        selfMs: round((e?.us ?? 0) / 1000, 1),
        selfPct: pct(e?.us ?? 0),
        totalMs: round(us / 1000, 1),
        totalPct: pct(us)
      }
    })
  const categories = [...byCategory.entries()].sort((a, b) => b[1] - a[1]).map(([category, us]) => ({ category, ms: round(us / 1000, 1), pct: pct(us) }))
  return {
    file: relative(ROOT, file),
    scope: windowed ? "measured runs only" : "whole service life (start-up included)",
    windowsUs: windowed ? windows : [],
    busyMs: round(busyUs / 1000, 1),
    idleMs: round(idleUs / 1000, 1),
    categories,
    topSelf,
    oursInclusive: ours
  }
}

// ---------------------------------------------------------------------------------------------------
// Output

const pad = (s: string, n: number) => (s.length >= n ? s : s + " ".repeat(n - s.length))
const lpad = (s: string, n: number) => (s.length >= n ? s : " ".repeat(n - s.length) + s)
const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US")

interface Measured {
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

interface ScenarioResult {
  readonly name: string
  readonly label: string
  readonly method: string
  readonly path: string
  readonly requestBody?: string
  readonly expectStatus: number
  readonly service: Measured
  readonly baseline?: Measured
  readonly ratioRps?: number
  /** Service CPU per request / baseline CPU per request. */
  readonly ratioCpuPerRequest?: number
  readonly upstreamCallsDuringRun: number
}

const printTable = (results: ReadonlyArray<ScenarioResult>) => {
  const head = `${pad("scenario", 27)}${pad("server", 10)}${lpad("req/s", 10)}${lpad("p50 ms", 9)}${lpad("p99 ms", 9)}${lpad("peak RSS MiB", 14)}${lpad("svc/base", 10)}${
    lpad("CPU µs/req", 12)
  }${lpad("ratio", 7)}${lpad("CPU", 6)}${lpad("load", 6)}  check`
  const lines = [head, "-".repeat(head.length + 4)]
  for (const r of results) {
    const row = (server: string, m: Measured, ratio?: number, cpuRatio?: number) =>
      `${pad(server === "service" ? r.label : "", 27)}${pad(server, 10)}${lpad(fmtInt(m.wrk.rps), 10)}${lpad(m.wrk.latencyMs.p50.toFixed(2), 9)}${lpad(m.wrk.latencyMs.p99.toFixed(2), 9)}${
        lpad(m.peakRssMiB.toFixed(1), 14)
      }${lpad(ratio === undefined ? "" : ratio.toFixed(3), 10)}${lpad(m.cpuUsPerRequest.toFixed(0), 12)}${lpad(cpuRatio === undefined ? "" : `x${cpuRatio.toFixed(1)}`, 7)}${lpad(m.cpuUtilisation.toFixed(2), 6)}${
        lpad(m.loadAverage1m.toFixed(1), 6)
      }  ${m.statusCheck}`
    lines.push(row("service", r.service, r.ratioRps, r.ratioCpuPerRequest))
    if (r.baseline !== undefined) lines.push(row("baseline", r.baseline))
  }
  process.stdout.write(`\n${lines.join("\n")}\n`)
}

const statusCheck = (scenario: ScenarioDef, wrk: WrkResult) => {
  const transport = wrk.errors.connect + wrk.errors.read + wrk.errors.write + wrk.errors.timeout
  const non2xx = wrk.errors.status // wrk counts statuses > 399
  const problems: Array<string> = []
  if (transport > 0) problems.push(`socket errors ${JSON.stringify({ ...wrk.errors, status: undefined })}`)
  if (scenario.expectStatus < 400 && non2xx > 0) problems.push(`${non2xx} responses >= 400`)
  if (scenario.expectStatus >= 400 && non2xx !== wrk.requests) problems.push(`only ${non2xx}/${wrk.requests} were >= 400`)
  return problems.length === 0 ? "ok" : problems.join("; ")
}

// ---------------------------------------------------------------------------------------------------
// Main

interface Server {
  readonly name: "service" | "baseline"
  readonly port: number
  readonly child: ChildProcess
}

/** Monotonic windows of the service's measured runs, to cut the CPU profile to them. */
const serviceWindows: Array<readonly [number, number]> = []

const measure = async (opts: Options, tmp: string, server: Server, scenario: ScenarioDef): Promise<Measured> => {
  const pid = server.child.pid!
  const rssBefore = readMem(pid)?.rssKiB ?? 0
  const reset = resetPeak(pid)
  const sampler = new RssSampler(pid).start()
  if (opts.warmup > 0) await runWrk(opts, tmp, { port: server.port, scenario, seconds: opts.warmup })
  const load = loadAverage()
  const cpu0 = cpuMs(pid) ?? 0
  const from = monoUs()
  const wrk = await runWrk(opts, tmp, { port: server.port, scenario, seconds: opts.duration })
  if (server.name === "service") serviceWindows.push([from, monoUs()])
  const cpu = (cpuMs(pid) ?? 0) - cpu0
  const peak = sampler.stop(reset)
  return {
    wrk,
    peakRssMiB: mib(peak),
    rssBeforeMiB: mib(rssBefore),
    cpuUsPerRequest: round((cpu * 1000) / Math.max(1, wrk.requests), 1),
    cpuUtilisation: round(cpu / 1000 / wrk.durationSec, 2),
    loadAverage1m: load,
    statusCheck: statusCheck(scenario, wrk)
  }
}

const countLines = (file: string) =>
  new Promise<number>((done) => {
    let n = 0
    createReadStream(file)
      .on("data", (chunk) => {
        const buf = chunk as Buffer
        for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) n++
      })
      .on("end", () => done(n))
      .on("error", () => done(-1))
  })

const main = async () => {
  const opts = parseOptions(process.argv.slice(2))
  const cpus = availableParallelism()
  const wrkV = wrkVersion()
  if (wrkV === undefined) fail("wrk not found: install it (Debian: apt-get install wrk)")
  const major = Number(process.versions.node.split(".")[0])
  if (major < 24) fail(`run with Node 24 (npm run bench, or node_modules/.bin/node test/bench/bench.ts); this is ${process.version}`)

  const scenarios = scenarioDefs.filter((s) => opts.scenarios.includes(s.name))
  const started = new Date()
  const stamp = started.toISOString().replace(/\.\d+Z$/, "Z").replaceAll(":", "-")
  mkdirSync(opts.out, { recursive: true })
  const tmp = mkdtempSync(join(tmpdir(), "bench-"))
  cleanups.push(() => rmSync(tmp, { recursive: true, force: true }))

  // Overall bound: every run plus generous start/stop time.
  const perRun = opts.warmup + opts.duration + 35
  const budgetSec = 180 + scenarios.length * 2 * perRun + (opts.requests === undefined ? 0 : Math.ceil(opts.requests / 500) + 120)
  setTimeout(() => {
    process.stderr.write(`bench: overall time limit of ${budgetSec} s reached, stopping\n`)
    void shutdown(3)
  }, budgetSec * 1000).unref()

  if (opts.loadCpus !== undefined) spawnSync("taskset", ["-pc", opts.loadCpus, String(process.pid)], { stdio: "ignore" })
  process.stdout.write(
    `bench: node ${process.version} (${NODE.startsWith(ROOT) ? relative(ROOT, NODE) : NODE}), ${wrkV}, ${cpus} CPUs, load average ${loadAverage()}; ` +
      `servers on CPU ${opts.serverCpus ?? "any"}, wrk on CPU ${opts.loadCpus ?? "any"}; ` +
      `${opts.connections} connections, ${opts.threads} thread(s), warm-up ${opts.warmup} s, ${opts.duration} s per run\n`
  )

  // 1. Upstream emulator
  const upstream = await startUpstream(opts)
  cleanups.push(() => void upstream.close())

  // 2. The service
  const servicePort = await freePort()
  const dataDir = join(tmp, "data")
  mkdirSync(dataDir)
  const profDir = join(opts.out, "prof", stamp)
  if (opts.cpuProf) mkdirSync(profDir, { recursive: true })
  const logPath = opts.accessLog === undefined ? join(tmp, "service-stdout.log") : resolve(opts.accessLog)
  const logFd = openSync(logPath, "w")
  const serviceArgv = pinned(opts.serverCpus, [NODE, ...(opts.cpuProf ? ["--cpu-prof", `--cpu-prof-dir=${profDir}`] : []), ...startArguments()])
  const serviceEnv = {
    ...process.env,
    PORT: String(servicePort),
    HOST,
    DATA_DIR: dataDir,
    PUBLIC_BASE_URL: `http://${HOST}:${servicePort}`,
    COINGECKO_BASE_URL: upstream.url,
    NEWSLETTER_PROVIDER: "local",
    RATE_LIMIT_HEALTH_PER_MIN: HIGH_LIMIT,
    RATE_LIMIT_RATES_PER_MIN: HIGH_LIMIT,
    RATE_LIMIT_SUBSCRIBE_PER_MIN: HIGH_LIMIT,
    NODE_ENV: "production"
  }
  const service = track(spawn(serviceArgv[0]!, serviceArgv.slice(1), { cwd: ROOT, env: serviceEnv, stdio: ["ignore", logFd, "pipe"] }))
  closeSync(logFd)
  const serviceErr = tail(service.stderr)
  await waitReady(servicePort, service, "service", serviceErr)
  const idleRss = readMem(service.pid!)
  process.stdout.write(`service: pid ${service.pid} on ${HOST}:${servicePort}, idle RSS ${mib(idleRss?.rssKiB ?? 0)} MiB, upstream ${upstream.url}\n`)

  // 3. Warm the rates cache, then capture each scenario's exact answer.
  const first = await call(servicePort, "POST", "/api/v1/exchange-rates", RATES_BODY, { "content-type": "application/json" })
  if (first.status !== 200) fail(`warm-up exchange-rates request: ${first.status} ${first.body.toString("utf8")}`)
  const callsAfterWarm = await upstream.totalCalls()
  const fixtures: Array<BaselineFixture> = []
  for (const s of scenarioDefs) {
    const res = await call(servicePort, s.method, s.path, s.body, lowerKeys(s.headers))
    if (res.status !== s.expectStatus) fail(`${s.label}: expected ${s.expectStatus}, got ${res.status}: ${res.body.toString("utf8").slice(0, 500)}`)
    if (s.name === "rates") {
      const body = JSON.parse(res.body.toString("utf8")) as { stale?: unknown; rates?: Array<unknown> }
      if (body.stale !== false || body.rates?.length !== 3) fail(`exchange-rates warm answer is not a fresh 3-coin answer: ${res.body.toString("utf8").slice(0, 300)}`)
    }
    fixtures.push({
      method: s.method,
      path: s.path,
      ...(s.body === undefined ? {} : { requestBody: s.body }),
      status: res.status,
      headers: res.headers,
      body: res.body.toString("base64"),
      ...(s.name === "health" ? { dynamic: "health" as const } : {})
    })
  }
  if ((await upstream.totalCalls()) !== callsAfterWarm) process.stdout.write("note: the capture requests reached the upstream (cache miss?)\n")
  writeFileSync(join(tmp, "fixtures.json"), JSON.stringify(fixtures, null, 1))

  // 4. The baseline
  const servers: Array<Server> = [{ name: "service", port: servicePort, child: service }]
  if (opts.baseline) {
    const port = await freePort()
    const argv = pinned(opts.serverCpus, [NODE, join(ROOT, "test/bench/baseline.ts"), join(tmp, "fixtures.json")])
    const child = track(spawn(argv[0]!, argv.slice(1), { cwd: ROOT, env: { ...process.env, PORT: String(port), NODE_ENV: "production" }, stdio: ["ignore", "ignore", "pipe"] }))
    const err = tail(child.stderr)
    await waitReady(port, child, "baseline", err)
    for (const [i, s] of scenarioDefs.entries()) {
      const want = fixtures[i]!
      const got = await call(port, s.method, s.path, s.body, lowerKeys(s.headers))
      const names = (h: ReadonlyArray<readonly [string, string]>) => h.map(([n]) => n).join(",")
      const sameBody = s.name === "health"
        ? Object.keys(JSON.parse(got.body.toString("utf8"))).join() === Object.keys(JSON.parse(Buffer.from(want.body, "base64").toString("utf8"))).join()
        : got.body.equals(Buffer.from(want.body, "base64"))
      if (got.status !== want.status || names(got.headers) !== names(want.headers) || !sameBody) {
        fail(`baseline answer differs for ${s.label}: ${got.status} [${names(got.headers)}] vs ${want.status} [${names(want.headers)}]`)
      }
    }
    servers.push({ name: "baseline", port, child })
    process.stdout.write(`baseline: pid ${child.pid} on ${HOST}:${port}, answers checked against the service (status, header names, body bytes)\n`)
  }

  // 5. Scenarios
  const results: Array<ScenarioResult> = []
  for (const s of scenarios) {
    const measured: Partial<Record<Server["name"], Measured>> = {}
    const callsBefore = await upstream.totalCalls()
    for (const server of servers) {
      process.stdout.write(`run: ${s.label} on ${server.name} (${opts.warmup} s warm-up + ${opts.duration} s)...`)
      const m = await measure(opts, tmp, server, s)
      measured[server.name] = m
      process.stdout.write(` ${fmtInt(m.wrk.rps)} req/s, p99 ${m.wrk.latencyMs.p99} ms, ${m.statusCheck}\n`)
    }
    const svc = measured.service!
    const base = measured.baseline
    results.push({
      name: s.name,
      label: s.label,
      method: s.method,
      path: s.path,
      ...(s.body === undefined ? {} : { requestBody: s.body }),
      expectStatus: s.expectStatus,
      service: svc,
      ...(base === undefined ? {} : {
        baseline: base,
        ratioRps: round(svc.wrk.rps / base.wrk.rps, 3),
        ratioCpuPerRequest: round(svc.cpuUsPerRequest / Math.max(0.1, base.cpuUsPerRequest), 2)
      }),
      upstreamCallsDuringRun: (await upstream.totalCalls()) - callsBefore
    })
  }

  // 6. Long RSS run
  let longRun: Record<string, unknown> | undefined
  if (opts.requests !== undefined) {
    const health = scenarioDefs[0]!
    const pid = service.pid!
    const beforeWarm = readMem(pid)!
    process.stdout.write(`long run: warm-up ${Math.max(opts.warmup, 2)} s, then ${fmtInt(opts.requests)} x ${health.label} on the service...`)
    await runWrk(opts, tmp, { port: servicePort, scenario: health, seconds: Math.max(opts.warmup, 2) })
    await sleep(1_000)
    const afterWarm = readMem(pid)!
    const reset = resetPeak(pid)
    const sampler = new RssSampler(pid, 1).start()
    const maxSeconds = Math.ceil(opts.requests / 500) + 60
    const wrk = await runWrk(opts, tmp, { port: servicePort, scenario: health, seconds: maxSeconds, stopAfter: opts.requests })
    const peak = sampler.stop(reset)
    const afterRun = readMem(pid)!
    await sleep(3_000)
    const afterIdle = readMem(pid)!
    longRun = {
      scenario: health.name,
      requested: opts.requests,
      completed: wrk.requests,
      stoppedByTimeLimit: wrk.requests < opts.requests,
      wrk,
      rssMiB: {
        beforeWarmup: mib(beforeWarm.rssKiB),
        afterWarmup: mib(afterWarm.rssKiB),
        peakDuringRun: mib(peak),
        afterRun: mib(afterRun.rssKiB),
        afterRunPlus3sIdle: mib(afterIdle.rssKiB),
        growthSinceWarmup: round(mib(afterIdle.rssKiB) - mib(afterWarm.rssKiB), 1)
      },
      timeline: sampler.timeline
    }
    process.stdout.write(` ${fmtInt(wrk.requests)} requests in ${wrk.durationSec} s (${fmtInt(wrk.rps)} req/s)\n`)
  }

  // 7. Stop the servers (the service writes its CPU profile on exit).
  const serviceExit = await stopChild(service, 15_000)
  for (const server of servers.slice(1)) await stopChild(server.child)
  const logBytes = existsSync(logPath) ? statSync(logPath).size : 0
  const logLines = logBytes > 0 ? await countLines(logPath) : 0
  const sent = results.reduce((n, r) => n + r.service.wrk.requests, 0)

  let profile: ReturnType<typeof analyseProfile> | undefined
  if (opts.cpuProf) {
    const files = existsSync(profDir) ? readdirSync(profDir).filter((f) => f.endsWith(".cpuprofile")) : []
    if (files.length === 0) process.stdout.write(`no .cpuprofile in ${relative(ROOT, profDir)} (service exit: ${serviceExit})\n`)
    else profile = analyseProfile(join(profDir, files.sort().at(-1)!), serviceWindows)
  }

  // 8. Report
  printTable(results)
  process.stdout.write(
    `\nreq/s and latency from wrk (closed loop, ${opts.connections} connections; latency percentiles understate an open-loop client's).\n` +
      `peak RSS = max(VmHWM since the run's start, VmRSS polled every 100 ms) over warm-up + run. svc/base = service req/s / baseline req/s.\n` +
      `CPU µs/req = server user+system CPU time / requests (robust to other load), ratio = service/baseline; CPU = cores used by the server; load = 1-min load average at the start.\n` +
      `service access log: ${fmtInt(logLines)} lines, ${mib(logBytes / 1024)} MiB (${opts.accessLog ?? "temp file"}); measured requests ${fmtInt(sent)} (plus warm-ups).\n`
  )
  for (const r of results) if (r.upstreamCallsDuringRun > 0) process.stdout.write(`note: ${r.label}: ${r.upstreamCallsDuringRun} upstream call(s) during the run (cache refresh)\n`)
  if (longRun !== undefined) process.stdout.write(`\nlong run RSS (MiB): ${JSON.stringify(longRun.rssMiB)}\n`)
  if (profile !== undefined) printProfile(profile)

  const result = {
    startedAt: started.toISOString(),
    node: process.version,
    wrk: wrkV,
    cpus,
    pinning: { serverCpus: opts.serverCpus ?? null, loadCpus: opts.loadCpus ?? null },
    config: {
      durationSec: opts.duration,
      warmupSec: opts.warmup,
      connections: opts.connections,
      threads: opts.threads,
      cpuProf: opts.cpuProf,
      serviceEnv: { RATE_LIMIT_HEALTH_PER_MIN: HIGH_LIMIT, RATE_LIMIT_RATES_PER_MIN: HIGH_LIMIT, RATE_LIMIT_SUBSCRIBE_PER_MIN: HIGH_LIMIT, NEWSLETTER_PROVIDER: "local", NODE_ENV: "production" }
    },
    serviceIdleRssMiB: mib(idleRss?.rssKiB ?? 0),
    accessLog: { lines: logLines, bytes: logBytes },
    scenarios: results,
    ...(longRun === undefined ? {} : { longRun }),
    ...(profile === undefined ? {} : { cpuProfile: profile })
  }
  const json = `${JSON.stringify(result, null, 2)}\n`
  const file = join(opts.out, `bench-${stamp}.json`)
  writeFileSync(file, json)
  writeFileSync(join(opts.out, "latest.json"), json)
  process.stdout.write(`\nwrote ${relative(ROOT, file)} and ${relative(ROOT, join(opts.out, "latest.json"))}\n`)
}

const lowerKeys = (headers: Readonly<Record<string, string>>) => Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]))

const printProfile = (p: ReturnType<typeof analyseProfile>) => {
  const out: Array<string> = [`\nCPU profile ${p.file}: ${p.busyMs} ms busy, ${p.idleMs} ms idle (${p.scope})`]
  out.push(`by origin: ${p.categories.slice(0, 10).map((c) => `${c.category} ${c.pct}%`).join(", ")}`)
  out.push("", `top ${p.topSelf.length} by self time (% of busy):`, `${lpad("self ms", 9)}${lpad("self%", 7)}${lpad("total%", 8)}  function  location`)
  for (const h of p.topSelf) out.push(`${lpad(h.selfMs.toFixed(1), 9)}${lpad(h.selfPct.toFixed(1), 7)}${lpad((h.totalPct ?? 0).toFixed(1), 8)}  ${h.function}  ${h.location}`)
  out.push("", "our code (src/) by inclusive time:", `${lpad("total ms", 9)}${lpad("total%", 8)}${lpad("self%", 7)}  function  location`)
  for (const h of p.oursInclusive) out.push(`${lpad((h.totalMs ?? 0).toFixed(1), 9)}${lpad((h.totalPct ?? 0).toFixed(1), 8)}${lpad(h.selfPct.toFixed(1), 7)}  ${h.function}  ${h.location}`)
  process.stdout.write(`${out.join("\n")}\n`)
}

main().then(
  () => shutdown(0),
  (error: unknown) => {
    if (cleaning) return // interrupted: the failure is a consequence
    process.stderr.write(`bench: ${error instanceof BenchError ? error.message : error instanceof Error ? error.stack : String(error)}\n`)
    void shutdown(1)
  }
)
