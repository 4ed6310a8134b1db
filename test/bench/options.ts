/** The benchmark's command line (see test/bench/bench.ts for what each option does). */
import { availableParallelism } from "node:os"
import { resolve } from "node:path"
import { fail, ROOT } from "./common.ts"
import { hasTaskset } from "./processes.ts"
import { scenarioDefs } from "./scenarios.ts"

export interface Options {
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
  readonly fastify: boolean
  /** The service as shipped: live quotes from the Coinbase emulator's feed (`--no-feed`: CoinGecko alone). */
  readonly feed: boolean
  /** The Redis mode (redisMode.ts) instead of the scenarios. */
  readonly redis: boolean
  /** The refresh mode (refreshMode.ts) instead of the scenarios. */
  readonly refresh: boolean
  /** Another checkout: its service and this one's, the scenarios on each in turn (compareMode.ts). */
  readonly compare: string | undefined
  /** Runs of each scenario on each side in the compare mode. */
  readonly runs: number
  /** The compare mode measures the two sides one after the other (A B, B A, ...) instead of at once. */
  readonly inTurn: boolean
  /** The stream mode (streamMode.ts): live price streams held, at each of `streamLevels` by `readers` processes. */
  readonly stream: boolean
  readonly streamLevels: ReadonlyArray<number>
  readonly readers: number
  readonly out: string
}

const USAGE = `usage: node test/bench/bench.ts [--duration S] [--warmup S] [--connections N] [--threads N]
  [--scenarios ${scenarioDefs.map((s) => s.name).join(",")}] [--requests N] [--cpu-prof]
  [--server-cpus LIST] [--load-cpus LIST] [--access-log PATH] [--no-baseline] [--no-fastify] [--no-feed] [--redis] [--refresh]
  [--compare DIR [--runs N] [--in-turn]] [--stream [--streams 1000,5000,10000] [--readers 4]] [--out DIR]
  (--stream: --duration 20 and --warmup 5 unless given)`

const FLAGS = ["--cpu-prof", "--no-baseline", "--no-fastify", "--no-feed", "--redis", "--refresh", "--in-turn", "--stream"]
const KNOWN = ["duration", "warmup", "connections", "threads", "scenarios", "requests", "server-cpus", "load-cpus", "access-log", "out", "compare", "runs", "streams", "readers"]

export const parseOptions = (argv: ReadonlyArray<string>): Options => {
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
    else if (FLAGS.includes(arg)) flags.add(arg.slice(2))
    else {
      const value = argv[++i]
      if (value === undefined) fail(`${arg} needs a value\n${USAGE}`)
      values.set(arg.slice(2), value)
    }
  }
  for (const key of values.keys()) if (!KNOWN.includes(key)) fail(`unknown option --${key}\n${USAGE}`)
  const int = (name: string, fallback: number | undefined, min: number, max: number) => {
    const raw = values.get(name)
    if (raw === undefined) return fallback
    const n = Number(raw.replace(/s$/, "").replaceAll("_", ""))
    if (!Number.isInteger(n) || n < min || n > max) fail(`--${name} must be an integer in ${min}..${max} (got ${raw})`)
    return n
  }
  const scenarios = (values.get("scenarios") ?? scenarioDefs.map((s) => s.name).join(",")).split(",").map((s) => s.trim()).filter((s) => s !== "")
  for (const s of scenarios) if (!scenarioDefs.some((d) => d.name === s)) fail(`unknown scenario ${s} (${scenarioDefs.map((d) => d.name).join(", ")})`)
  const stream = flags.has("stream")
  const streamLevels = (values.get("streams") ?? "1000,5000,10000").split(",").map((s) => Number(s.trim().replaceAll("_", "")))
  if (streamLevels.some((n) => !Number.isInteger(n) || n < 1 || n > 50_000)) fail(`--streams: a comma list of stream counts, each in 1..50000 (got ${values.get("streams")})`)
  const cpus = availableParallelism()
  const pin = hasTaskset() && cpus >= 2
  return {
    duration: int("duration", stream ? 20 : 10, 1, 3_600)!,
    warmup: int("warmup", stream ? 5 : 2, 0, 600)!,
    connections: int("connections", 32, 1, 10_000)!,
    threads: int("threads", 1, 1, 64)!,
    scenarios,
    requests: int("requests", undefined, 1, 100_000_000),
    cpuProf: flags.has("cpu-prof"),
    serverCpus: values.get("server-cpus") ?? (pin ? "0" : undefined),
    loadCpus: values.get("load-cpus") ?? (pin ? (cpus > 2 ? `1-${cpus - 1}` : "1") : undefined),
    accessLog: values.get("access-log"),
    baseline: !flags.has("no-baseline"),
    fastify: !flags.has("no-fastify"),
    feed: !flags.has("no-feed"),
    redis: flags.has("redis"),
    refresh: flags.has("refresh"),
    compare: values.get("compare") === undefined ? undefined : resolve(values.get("compare")!),
    runs: int("runs", 3, 1, 100)!,
    inTurn: flags.has("in-turn"),
    stream,
    streamLevels,
    readers: int("readers", 4, 1, 64)!,
    out: resolve(ROOT, values.get("out") ?? "bench-results")
  }
}
