/**
 * `npm run bench -- --redis` (issue 16): what sharing the limits through Redis costs, and how far a limit
 * is exceeded across instances.
 *
 * 1. The cached rates answer (the `rates` scenario, limits counted at 1e9/min: the limiter runs, nobody is
 *    refused) on one process in memory and one process with REDIS_URL (side by side on --server-cpus,
 *    measured A B B A), then WEB_CONCURRENCY=2 with REDIS_URL, unpinned (two workers on one CPU would
 *    measure nothing). Target: one process with Redis keeps >= 0.8 of the in-memory req/s. CPU µs per
 *    request is reported too: unlike req/s it hardly moves when something else loads the machine.
 * 2. Overshoot: two single-process instances on one Redis with RATE_LIMIT_RATES_PER_MIN=1000, both driven
 *    by wrk at once for 3 s within one minute window; admitted = 200s on both. The stated bound
 *    (src/http/sharedCounter.ts) is limit + 2 x floor(limit / 10).
 *
 * Redis: REDIS_URL, else redis://127.0.0.1:6379, checked with PING before anything runs; every run has its
 * own REDIS_KEY_PREFIX. Results: a table on stdout, JSON in <out>/redis-<timestamp>.json and redis-latest.json.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { createConnection } from "node:net"
import { join, relative } from "node:path"
import { randomUUID } from "node:crypto"
import { fail, fmtInt, HIGH_LIMIT, lpad, pad, ROOT, round, sleep } from "./common.ts"
import type { Options } from "./options.ts"
import { call, stopChild } from "./processes.ts"
import { RATES_BODY, scenarioDefs } from "./scenarios.ts"
import { type Server, startService } from "./servers.ts"
import { cpuMs } from "./system.ts"
import { runWrk, type WrkResult } from "./wrk.ts"

const rates = scenarioDefs.find((s) => s.name === "rates")!
const OVERSHOOT_LIMIT = 1_000
const OVERSHOOT_SECONDS = 3

/** PING over a bare socket: a bench on an absent Redis would silently measure memory. */
const ping = (url: string) =>
  new Promise<void>((done, reject) => {
    const { hostname, port } = new URL(url)
    const socket = createConnection({ host: hostname, port: Number(port || 6379) }, () => socket.write("PING\r\n"))
    socket.setTimeout(2_000, () => socket.destroy(new Error("no answer within 2 s")))
    socket.once("data", (chunk) => {
      socket.end()
      chunk.toString().startsWith("+PONG") ? done() : reject(new Error(chunk.toString().trim()))
    })
    socket.once("error", reject)
  })

interface ServiceRun {
  readonly label: string
  readonly env: Readonly<Record<string, string | undefined>>
  readonly pinned: boolean
}

const start = async (opts: Options, tmp: string, upstreamUrl: string, run: ServiceRun, index: number): Promise<Server> => {
  const dataDir = join(tmp, `redis-mode-${index}`)
  mkdirSync(dataDir, { recursive: true })
  const service = await startService({
    serverCpus: run.pinned ? opts.serverCpus : undefined,
    dataDir,
    upstreamUrl,
    logPath: join(tmp, `redis-mode-${index}.log`),
    profDir: undefined,
    env: run.env
  })
  const warm = await call(service.port, "POST", rates.path, RATES_BODY, { "content-type": "application/json" })
  if (warm.status !== 200) fail(`${run.label}: warm-up exchange-rates request: ${warm.status} ${warm.body.toString("utf8").slice(0, 300)}`)
  return service
}

/** One measured wrk run on a running service, with its CPU time per request (robust to a shared machine's load). */
const measure = async (opts: Options, tmp: string, service: Server, label: string, cpu: boolean) => {
  process.stdout.write(`redis mode: ${rates.label} on ${label} (${opts.warmup} s warm-up + ${opts.duration} s)...`)
  if (opts.warmup > 0) await runWrk(opts, tmp, { port: service.port, scenarios: [rates], seconds: opts.warmup })
  const cpu0 = cpuMs(service.child.pid!) ?? 0
  const wrk = await runWrk(opts, tmp, { port: service.port, scenarios: [rates], seconds: opts.duration })
  const cpuUsPerRequest = cpu ? round((((cpuMs(service.child.pid!) ?? 0) - cpu0) * 1000) / Math.max(1, wrk.requests), 1) : undefined
  process.stdout.write(` ${fmtInt(wrk.rps)} req/s, p99 ${wrk.latencyMs.p99} ms${cpu ? `, ${cpuUsPerRequest} µs CPU/req` : ""}, non-2xx ${wrk.errors.status}\n`)
  if (wrk.errors.status > 0) fail(`${label}: ${wrk.errors.status} responses were not 200 (limits must not refuse here)`)
  return { rps: wrk.rps, p99Ms: wrk.latencyMs.p99, cpuUsPerRequest, wrk }
}

const mean = (xs: ReadonlyArray<number>) => round(xs.reduce((a, b) => a + b, 0) / xs.length, 1)

/**
 * Memory and Redis single processes run side by side and are measured in the order A B B A, so that a
 * shared machine's drifting load favours neither; then the cluster.
 */
const throughput = async (opts: Options, tmp: string, upstreamUrl: string, runs: readonly [ServiceRun, ServiceRun, ServiceRun]) => {
  const [memoryRun, redisRun, clusterRun] = runs
  const [memory, redis] = [await start(opts, tmp, upstreamUrl, memoryRun, 0), await start(opts, tmp, upstreamUrl, redisRun, 1)]
  const samples: Array<Array<Awaited<ReturnType<typeof measure>>>> = [[], []]
  try {
    for (const i of [0, 1, 1, 0] as const) {
      samples[i]!.push(await measure(opts, tmp, i === 0 ? memory : redis, runs[i].label, true))
    }
  } finally {
    await Promise.all([stopChild(memory.child, 15_000), stopChild(redis.child, 15_000)])
  }
  const cluster = await start(opts, tmp, upstreamUrl, clusterRun, 2)
  let clustered: Awaited<ReturnType<typeof measure>>
  try {
    clustered = await measure(opts, tmp, cluster, clusterRun.label, false)
  } finally {
    await stopChild(cluster.child, 15_000)
  }
  const summary = (label: string, xs: ReadonlyArray<Awaited<ReturnType<typeof measure>>>) => ({
    label,
    rps: mean(xs.map((x) => x.rps)),
    p99Ms: Math.max(...xs.map((x) => x.p99Ms)),
    cpuUsPerRequest: xs[0]!.cpuUsPerRequest === undefined ? undefined : mean(xs.map((x) => x.cpuUsPerRequest!)),
    runs: xs.map((x) => x.rps)
  })
  return {
    measured: [summary(memoryRun.label, samples[0]!), summary(redisRun.label, samples[1]!), summary(clusterRun.label, [clustered])],
    wrk: [...samples[0]!, ...samples[1]!, clustered].map((x) => x.wrk)
  }
}

/** Two instances, one limit, both driven at once: admitted requests against the limit. */
const overshoot = async (opts: Options, tmp: string, upstreamUrl: string, redisUrl: string) => {
  const env = { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: `bench-${randomUUID()}:`, RATE_LIMIT_RATES_PER_MIN: String(OVERSHOOT_LIMIT) }
  const run = { label: "overshoot", env, pinned: false }
  const [a, b] = [await start(opts, tmp, upstreamUrl, run, 10), await start(opts, tmp, upstreamUrl, run, 11)]
  try {
    // One fixed window: start well inside a minute.
    const intoMinute = Date.now() % 60_000
    if (intoMinute > 60_000 - (OVERSHOOT_SECONDS + 8) * 1000) await sleep(60_000 - intoMinute + 500)
    process.stdout.write(`redis mode: overshoot, limit ${OVERSHOOT_LIMIT}/min on two instances, wrk on both for ${OVERSHOOT_SECONDS} s...`)
    // Each wrk in its own directory: they must not write the same script file at once.
    const runs: Array<WrkResult> = await Promise.all([a, b].map((s, i) => {
      const dir = join(tmp, `overshoot-${i}`)
      mkdirSync(dir, { recursive: true })
      return runWrk(opts, dir, { port: s.port, scenarios: [rates], seconds: OVERSHOOT_SECONDS })
    }))
    // The two warm-up requests were admitted too.
    const admitted = 2 + runs.reduce((n, r) => n + r.requests - r.errors.status, 0)
    const refused = runs.reduce((n, r) => n + r.errors.status, 0)
    const bound = OVERSHOOT_LIMIT + 2 * Math.floor(OVERSHOOT_LIMIT / 10)
    process.stdout.write(` admitted ${admitted}, refused ${fmtInt(refused)} (bound ${bound})\n`)
    return { limit: OVERSHOOT_LIMIT, instances: 2, admitted, refused, overshoot: admitted - OVERSHOOT_LIMIT, bound, withinBound: admitted <= bound }
  } finally {
    await Promise.all([stopChild(a.child, 15_000), stopChild(b.child, 15_000)])
  }
}

export const runRedisMode = async (opts: Options, tmp: string, upstreamUrl: string, stamp: string) => {
  const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
  await ping(redisUrl).catch((e: Error) => fail(`--redis needs a Redis at ${redisUrl} (REDIS_URL): ${e.message}`))
  const prefix = () => `bench-${randomUUID()}:`
  const runs: readonly [ServiceRun, ServiceRun, ServiceRun] = [
    { label: "memory, 1 process", env: { REDIS_URL: undefined, WEB_CONCURRENCY: undefined }, pinned: true },
    { label: "Redis, 1 process", env: { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: prefix() }, pinned: true },
    { label: "Redis, WEB_CONCURRENCY=2", env: { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: prefix(), WEB_CONCURRENCY: "2" }, pinned: false }
  ]
  const { measured, wrk } = await throughput(opts, tmp, upstreamUrl, runs)
  const limits = await overshoot(opts, tmp, upstreamUrl, redisUrl)

  const memory = measured[0]!.rps
  process.stdout.write(`\n${pad("cached rates answer (limits counted)", 40)}${lpad("req/s", 10)}${lpad("p99 ms", 9)}${lpad("/memory", 9)}${lpad("µs CPU/req", 12)}\n`)
  for (const m of measured) {
    const cpu = m.cpuUsPerRequest === undefined ? "-" : String(m.cpuUsPerRequest)
    process.stdout.write(`${pad(m.label, 40)}${lpad(fmtInt(m.rps), 10)}${lpad(String(m.p99Ms), 9)}${lpad(String(round(m.rps / memory, 2)), 9)}${lpad(cpu, 12)}\n`)
  }
  const ratio = round(measured[1]!.rps / memory, 2)
  const cpuRatio = round(measured[0]!.cpuUsPerRequest! / measured[1]!.cpuUsPerRequest!, 2)
  process.stdout.write(
    `one process with Redis / in memory: ${ratio} in req/s (target >= 0.8: ${ratio >= 0.8 ? "met" : "NOT met"}), ${cpuRatio} in CPU per request ` +
      `(memory µs / Redis µs); means of 2 runs each, order A B B A; rate limits ${fmtInt(HIGH_LIMIT)}/min; ` +
      `first two on CPU ${opts.serverCpus ?? "any"}, the cluster unpinned\n` +
      `overshoot across 2 instances: ${limits.admitted} admitted for a limit of ${limits.limit} (${limits.overshoot} over; bound ${limits.bound - limits.limit}: ` +
      `${limits.withinBound ? "within" : "NOT within"})\n`
  )
  const result = {
    startedAt: new Date().toISOString(),
    node: process.version,
    redisMode: { throughput: measured, ratioRedisToMemory: ratio, ratioCpuPerRequest: cpuRatio, overshoot: limits },
    wrk
  }
  const json = `${JSON.stringify(result, null, 2)}\n`
  const file = join(opts.out, `redis-${stamp}.json`)
  writeFileSync(file, json)
  writeFileSync(join(opts.out, "redis-latest.json"), json)
  process.stdout.write(`wrote ${relative(ROOT, file)} and ${relative(ROOT, join(opts.out, "redis-latest.json"))}\n`)
}
