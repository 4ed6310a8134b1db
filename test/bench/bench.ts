/**
 * HTTP benchmark of the service against a raw `node:http` baseline and a Fastify 5 peer (issues 12, 17).
 * Run with Node 24 (type stripping), e.g. through npm so that the pinned Node is used:
 *
 *   npm run bench                                      all scenarios, 10 s each, 2 s warm-up
 *   npm run bench -- --duration 5 --scenarios rates    one scenario, 5 s
 *   npm run bench -- --requests 1000000                plus a long RSS run: 1M requests, the scenarios mixed
 *   npm run bench -- --scenarios invalid --cpu-prof    profile the service; prints the top self-time functions
 *   npm run bench -- --redis                           Redis mode (redisMode.ts): cached rates answer in memory
 *                                                      vs with Redis vs WEB_CONCURRENCY=2, and a limit's overshoot
 *   npm run bench -- --refresh                         refresh mode (refreshMode.ts): a cached rates answer under load
 *                                                      while its upstream answers after 2 s (p99 under 10 ms)
 *   npm run bench -- --month [--step-s 20]             month mode (monthMode.ts): a month of a landing page's traffic on
 *                                                      a simulated clock; CoinGecko credits spent per plan
 *                                                      (--with-stream: each month also with a live price stream open)
 *   npm run bench -- --month-real [--minutes 10]       the same traffic on a real clock against `npm start` (monthRealMode.ts)
 *   npm run bench -- --way [--root DIR]                the files, cross-file hops and back and forth of one cold rates request (wayMode.ts)
 *   npm run bench -- --token [--root DIR] [--runs N]   POST /oauth/token: a secret client, a private_key_jwt client, and
 *                                                      both alternated (tokenMode.ts; --root: another checkout's service;
 *                                                      --compare DIR: the secret method here and there, in turn)
 *   npm run bench -- --cdn [--seconds 10]              cdn mode (cdnMode.ts): GET /api/v1/rates with and without nginx in
 *                                                      front, 100 and 1,000 visits a second: origin requests per visit,
 *                                                      the oldest price served
 *   npm run bench -- --stream [--streams 1000,5000]    stream mode (streamMode.ts): live price streams held by reader
 *                  [--duration 20] [--readers 4]       processes at each level: held, events/s, lag from tick to reader,
 *                                                      the service's CPU and RSS above idle
 *   npm run bench -- --compare DIR [--runs N]          compare mode (compareMode.ts): the scenarios on this checkout's service
 *                  [--in-turn]                         and DIR's, fresh processes each run (N, 3 by default), both measured at
 *                                                      once (--in-turn: A B, B A, ...): CPU per request of each and their
 *                                                      ratio per scenario, with its spread
 *
 * Options: --duration S (10)  --warmup S (2)  --connections N (32)  --threads N (1)
 *          --scenarios health,rates,invalid,malformed,notfound,method (all)  --requests N  --cpu-prof
 *          --server-cpus LIST (0)  --load-cpus LIST (1)  --access-log PATH (temp file, deleted)
 *          --no-baseline  --no-fastify  --redis  --refresh  --out DIR (bench-results)
 *
 * What runs (servers.ts): the CoinGecko emulator in this process (upstream.ts); the service as `npm start`
 * starts it, DATA_DIR in a temp dir, NEWSLETTER_PROVIDER=local, rate limits of 1e9/min (every request comes
 * from 127.0.0.1: the limiter runs, nobody gets 429), its stdout (one JSON access-log line per request) in
 * a file, so logging is paid for; the raw baseline (baseline.ts) replaying the service's captured bytes; the
 * Fastify peer (fastify/server.ts: ajv, problem+json, pino request logs to /dev/null, @fastify/rate-limit
 * with the same limits). Each scenario (scenarios.ts) runs the same wrk invocation (wrk.ts: 32 connections,
 * a Lua script for method, body and headers, a warm-up run first) on each server in turn (the order
 * rotates from one scenario to the next, so that a drifting load favours no server).
 * With `taskset` and 2+ CPUs the servers run on --server-cpus and wrk (and this process) on --load-cpus:
 * single-core server numbers. Peak RSS: VmHWM of the server (reset before each run through
 * /proc/PID/clear_refs when allowed) and VmRSS polled every 100 ms, whichever is higher. CPU µs/req: the
 * server's user + system time (/proc/PID/stat) over the measured run divided by its requests; unlike
 * req/s it hardly moves when something else shares the machine.
 *
 * --requests N: after the scenarios, N requests on the service cycling through the selected scenarios
 * (wrk stops at the count), with RSS before and after a warm-up, a per-second timeline, after the run
 * and after 3 s idle. --cpu-prof: the service runs with `--cpu-prof`; its profile is cut to the measured
 * service runs (profile.ts) and printed for all of them and per scenario. Profiling slows the service:
 * compare req/s from profiled runs only with each other.
 *
 * Results: tables on stdout, JSON in bench-results/bench-<timestamp>.json and bench-results/latest.json.
 * Every child is stopped on exit, on error and on signals; every run is bounded by wrk's -d and by an
 * overall watchdog. Targets are 127.0.0.1 only.
 */
import { spawnSync } from "node:child_process"
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { BenchError, fail, fmtInt, HIGH_LIMIT, HOST, mib, NODE, ROOT, round, sleep } from "./common.ts"
import { type Options, parseOptions } from "./options.ts"
import { runCdnMode } from "./cdnMode.ts"
import { runCompareMode } from "./compareMode.ts"
import { cleanups, isCleaning, shutdown, stopChild } from "./processes.ts"
import { measure } from "./measure.ts"
import { analyseProfile, printProfile, type ProfileWindow } from "./profile.ts"
import { type Measured, printFloors, printTable, ratios, type ScenarioResult, type ServerName } from "./report.ts"
import { type ScenarioDef, scenarioDefs } from "./scenarios.ts"
import { captureFixtures, type Server, serviceSettings, startBaseline, startFastify, startService } from "./servers.ts"
import { runRedisMode } from "./redisMode.ts"
import { runMonthMode } from "./monthMode.ts"
import { runMonthRealMode } from "./monthRealMode.ts"
import { runRefreshMode } from "./refreshMode.ts"
import { runStreamMode } from "./streamMode.ts"
import { runTokenMode } from "./tokenMode.ts"
import { runWayMode } from "./wayMode.ts"
import { loadAverage, readMem, resetPeak, RssSampler } from "./system.ts"
import { startUpstream } from "./upstream.ts"
import { startCoinbaseEmulator } from "../emulators/coinbase.ts"
import { runWrk, wrkVersion } from "./wrk.ts"

/** Monotonic windows of the service's measured runs, to cut the CPU profile to them. */
const serviceWindows: Array<ProfileWindow> = []

/** N requests cycling through `scenarios` on the service: RSS before, during and after. */
const longRun = async (opts: Options, tmp: string, service: Server, scenarios: ReadonlyArray<ScenarioDef>, requests: number) => {
  const pid = service.child.pid!
  const beforeWarm = readMem(pid)!
  const label = scenarios.map((s) => s.name).join("+")
  process.stdout.write(`long run: warm-up ${Math.max(opts.warmup, 2)} s, then ${fmtInt(requests)} requests (${label}) on the service...`)
  await runWrk(opts, tmp, { port: service.port, scenarios, seconds: Math.max(opts.warmup, 2) })
  await sleep(1_000)
  const afterWarm = readMem(pid)!
  const reset = resetPeak(pid)
  const sampler = new RssSampler(pid, 1).start()
  const wrk = await runWrk(opts, tmp, { port: service.port, scenarios, seconds: Math.ceil(requests / 500) + 60, stopAfter: requests })
  const peak = sampler.stop(reset)
  const afterRun = readMem(pid)!
  await sleep(3_000)
  const afterIdle = readMem(pid)!
  const errorShare = scenarios.filter((s) => s.expectStatus >= 400).length / scenarios.length
  process.stdout.write(` ${fmtInt(wrk.requests)} requests in ${wrk.durationSec} s (${fmtInt(wrk.rps)} req/s)\n`)
  return {
    scenarios: scenarios.map((s) => s.name),
    requested: requests,
    completed: wrk.requests,
    stoppedByTimeLimit: wrk.requests < requests,
    responsesAbove399: wrk.errors.status,
    expectedAbove399: Math.round(wrk.requests * errorShare),
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
  // The month mode runs the service in this process on a simulated clock, with options of its own.
  if (process.argv.includes("--month")) return void (await runMonthMode(process.argv.slice(2)))
  if (process.argv.includes("--month-real")) return runMonthRealMode(process.argv.slice(2))
  if (process.argv.includes("--way")) return runWayMode(process.argv.slice(2))
  if (process.argv.includes("--token")) return runTokenMode(process.argv.slice(2))
  if (process.argv.includes("--cdn")) return runCdnMode(process.argv.slice(2))
  const opts = parseOptions(process.argv.slice(2))
  if (opts.stream) return runStreamMode(opts)
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
  const servers = opts.compare !== undefined ? 2 * opts.runs : 1 + (opts.baseline ? 1 : 0) + (opts.fastify ? 1 : 0)
  const budgetSec = 240 + scenarios.length * servers * (opts.warmup + opts.duration + 35) + (opts.requests === undefined ? 0 : Math.ceil(opts.requests / 500) + 120)
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

  // 1. Upstream emulator, then the service.
  const upstream = await startUpstream(opts.loadCpus)
  cleanups.push(() => void upstream.close())
  if (opts.redis) return runRedisMode(opts, tmp, upstream.url, stamp)
  if (opts.refresh) return runRefreshMode(opts, tmp, upstream, stamp)
  if (opts.compare !== undefined) return runCompareMode(opts, tmp, upstream, stamp)
  const dataDir = join(tmp, "data")
  mkdirSync(dataDir)
  const profDir = opts.cpuProf ? join(opts.out, "prof", stamp) : undefined
  if (profDir !== undefined) mkdirSync(profDir, { recursive: true })
  const logPath = opts.accessLog === undefined ? join(tmp, "service-stdout.log") : resolve(opts.accessLog)
  // As shipped: the majors' prices live from the Coinbase emulator's feed (its prices move, so a cached
  // answer is made again once a second), Coinbase as the second source.
  const coinbase = opts.feed ? await startCoinbaseEmulator({ host: HOST }) : undefined
  if (coinbase !== undefined) cleanups.push(() => void coinbase.close())
  const coinbaseEnv = coinbase === undefined ? {} : { RATES_FALLBACK: "coinbase", COINBASE_BASE_URL: coinbase.url, COINBASE_WS_URL: coinbase.wsUrl }
  const service = await startService({ serverCpus: opts.serverCpus, dataDir, upstreamUrl: upstream.url, logPath, profDir, env: coinbaseEnv })
  const idleRss = readMem(service.child.pid!)
  process.stdout.write(
    `service: pid ${service.child.pid} on ${HOST}:${service.port}, idle RSS ${mib(idleRss?.rssKiB ?? 0)} MiB, upstream ${upstream.url}` +
      `${coinbase === undefined ? "" : `, live quotes from ${coinbase.wsUrl}`}\n`
  )

  // 2. Each scenario's exact answer, then the peers, checked against it.
  const fixtures = await captureFixtures(service.port, scenarioDefs)
  const callsAfterCapture = await upstream.totalCalls()
  const all: Array<Server> = [service]
  if (opts.baseline) {
    const baseline = await startBaseline(opts.serverCpus, tmp, fixtures, scenarioDefs)
    all.push(baseline)
    process.stdout.write(`raw node baseline: pid ${baseline.child.pid} on ${HOST}:${baseline.port}, answers checked (status, header names, body bytes)\n`)
  }
  if (opts.fastify) {
    const fastify = await startFastify(opts.serverCpus, tmp, service.port, fixtures, scenarioDefs)
    all.push(fastify)
    process.stdout.write(`fastify peer: pid ${fastify.child.pid} on ${HOST}:${fastify.port}, answers checked (status, media type, Allow, members; cached answer bytes)\n`)
  }
  if ((await upstream.totalCalls()) !== callsAfterCapture) process.stdout.write("note: checking the peers reached the upstream (cache miss?)\n")

  // 3. Scenarios: the same wrk invocation on every server.
  const results: Array<ScenarioResult> = []
  for (const [index, s] of scenarios.entries()) {
    const measured: Partial<Record<ServerName, Measured>> = {}
    const callsBefore = await upstream.totalCalls()
    // The order rotates per scenario: a shared machine's load drifts, and no server always goes first.
    for (const server of all.map((_, k) => all[(k + index) % all.length]!)) {
      process.stdout.write(`run: ${s.label} on ${server.name} (${opts.warmup} s warm-up + ${opts.duration} s)...`)
      const m = await measure(opts, tmp, server, s, server.name === "service" ? (from, to) => serviceWindows.push({ scenario: s.name, from, to }) : undefined)
      measured[server.name] = m
      process.stdout.write(` ${fmtInt(m.wrk.rps)} req/s, p99 ${m.wrk.latencyMs.p99} ms, ${m.cpuUsPerRequest} µs CPU/req, ${m.statusCheck}\n`)
    }
    const svc = measured.service!
    const [raw, fy] = [ratios(svc, measured.baseline), ratios(svc, measured.fastify)]
    results.push({
      name: s.name,
      label: s.label,
      method: s.method,
      path: s.path,
      ...(s.body === undefined ? {} : { requestBody: s.body }),
      expectStatus: s.expectStatus,
      service: svc,
      ...(measured.baseline === undefined ? {} : { baseline: measured.baseline, ratioRps: raw!.rps, ratioCpuPerRequest: raw!.cpu }),
      ...(measured.fastify === undefined ? {} : { fastify: measured.fastify, ratioRpsFastify: fy!.rps, ratioCpuPerRequestFastify: fy!.cpu }),
      upstreamCallsDuringRun: (await upstream.totalCalls()) - callsBefore
    })
  }

  // 4. Long RSS run on the service.
  const long = opts.requests === undefined ? undefined : await longRun(opts, tmp, service, scenarios, opts.requests)

  // 5. Stop the servers (the service writes its CPU profile on exit).
  const serviceExit = await stopChild(service.child, 15_000)
  for (const server of all.slice(1)) await stopChild(server.child)
  const logBytes = existsSync(logPath) ? statSync(logPath).size : 0
  const logLines = logBytes > 0 ? await countLines(logPath) : 0
  const sent = results.reduce((n, r) => n + r.service.wrk.requests, 0)

  let profile: ReturnType<typeof analyseProfile> | undefined
  if (profDir !== undefined) {
    const files = existsSync(profDir) ? readdirSync(profDir).filter((f) => f.endsWith(".cpuprofile")) : []
    if (files.length === 0) process.stdout.write(`no .cpuprofile in ${relative(ROOT, profDir)} (service exit: ${serviceExit})\n`)
    else profile = analyseProfile(join(profDir, files.sort().at(-1)!), serviceWindows)
  }

  // 6. Report
  printTable(results)
  process.stdout.write(
    `\nreq/s and latency from wrk (closed loop, ${opts.connections} connections; latency percentiles understate an open-loop client's).\n` +
      `peak RSS = max(VmHWM since the run's start, VmRSS polled every 100 ms) over warm-up + run. svc/this = service req/s / this server's req/s.\n` +
      `CPU µs/req = server user+system CPU time / requests (robust to other load); its svc/this = service / this server; CPU = cores used; load = 1-min load average at the start.\n` +
      `service access log: ${fmtInt(logLines)} lines, ${mib(logBytes / 1024)} MiB (${opts.accessLog ?? "temp file"}); measured requests ${fmtInt(sent)} (plus warm-ups).\n`
  )
  if (opts.baseline || opts.fastify) printFloors(results, scenarioDefs)
  for (const r of results) if (r.upstreamCallsDuringRun > 0) process.stdout.write(`note: ${r.label}: ${r.upstreamCallsDuringRun} upstream call(s) during the run (cache refresh)\n`)
  if (long !== undefined) {
    process.stdout.write(`\nlong run RSS (MiB): ${JSON.stringify(long.rssMiB)}; responses >= 400: ${fmtInt(long.responsesAbove399)} (expected about ${fmtInt(long.expectedAbove399)})\n`)
  }
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
      servers: all.map((s) => s.name),
      serviceEnv: serviceSettings,
      fastifyRateLimitPerMin: HIGH_LIMIT
    },
    serviceIdleRssMiB: mib(idleRss?.rssKiB ?? 0),
    accessLog: { lines: logLines, bytes: logBytes },
    scenarios: results,
    ...(long === undefined ? {} : { longRun: long }),
    ...(profile === undefined ? {} : { cpuProfile: profile })
  }
  const json = `${JSON.stringify(result, null, 2)}\n`
  const file = join(opts.out, `bench-${stamp}.json`)
  writeFileSync(file, json)
  writeFileSync(join(opts.out, "latest.json"), json)
  process.stdout.write(`\nwrote ${relative(ROOT, file)} and ${relative(ROOT, join(opts.out, "latest.json"))}\n`)
}

main().then(
  () => shutdown(0),
  (error: unknown) => {
    if (isCleaning()) return // interrupted: the failure is a consequence
    process.stderr.write(`bench: ${error instanceof BenchError ? error.message : error instanceof Error ? error.stack : String(error)}\n`)
    void shutdown(1)
  }
)
