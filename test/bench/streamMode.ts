/**
 * `npm run bench -- --stream [--streams 1000,5000,10000] [--duration 20] [--warmup 5] [--readers 4]` (issue 41):
 * live price streams held by the service. The service as `npm start` runs it (servers.ts, pinned on
 * --server-cpus), over the CoinGecko emulator and the Coinbase emulator, whose feed ticks every followed pair
 * twice a second (`tickEveryMs` 500, no trade dropped), with LIVE_STREAMS_MAX raised above the largest level
 * and the per-address limits as shipped (LIVE_STREAMS_PER_ADDRESS 100, MAX_CONNECTIONS_PER_ADDRESS 256). Reader
 * processes (streamReader.ts, on --load-cpus), 100 streams from each of their local addresses (127.N.x.y), open
 * `GET /api/v1/prices/stream?cryptos=BTC,ETH,SOL` up to each level in turn (1,000, then 4,000 more, ...: the
 * streams of a level stay open into the next), and after a warm-up count for --duration
 * seconds: streams held (open at the end / asked), price events a second received (and the ideal: held × 3
 * coins × 2 ticks a second), the lag from tick to reader (receipt less the event's `at`, the tick's time),
 * the service's CPU (/proc/PID/stat over the window, in cores) and RSS above its idle RSS before any stream
 * (at the window's end, and the peak since the level's first open), streams the service closed and opens
 * refused or failed. Goal: 10,000 held, lag p99 ≤ 500 ms, RSS ≤ 200 MB above idle.
 * Results: a table on stdout, JSON in <out>/stream-<timestamp>.json and stream-latest.json.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { request } from "node:http"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { fail, fmtInt, HOST, mib, NODE, ROOT, round, sleep } from "./common.ts"
import type { Options } from "./options.ts"
import { cleanups, freePort, pinned, stopChild, track } from "./processes.ts"
import { printStreamTable, type StreamLevel } from "./report.ts"
import { startService } from "./servers.ts"
import type { ReaderCommand, ReaderReply, ReaderReport } from "./streamReader.ts"
import { cpuMs, loadAverage, readMem, resetPeak, RssSampler, runQueueWaitMs } from "./system.ts"
import { startUpstream } from "./upstream.ts"
import { startCoinbaseEmulator } from "../emulators/coinbase.ts"

const PATH = "/api/v1/prices/stream?cryptos=BTC,ETH,SOL"
const COINS = 3
const TICKS_PER_SECOND = 2
const PAIRS = ["BTC-USD", "ETH-USD", "SOL-USD"]
/** Streams opened from one local address: the service's shipped LIVE_STREAMS_PER_ADDRESS (and under MAX_CONNECTIONS_PER_ADDRESS). */
const PER_ADDRESS = 100
const GOAL = { streams: 10_000, lagP99Ms: 500, rssAboveIdleMB: 200 }

interface Reader {
  readonly child: ChildProcess
  /** Its local addresses: 127.N.x.y. */
  readonly addressBase: string
  readonly ask: <T extends ReaderReply["type"]>(command: ReaderCommand, answer: T) => Promise<Extract<ReaderReply, { type: T }>>
}

const startReader = (index: number, cpus: string | undefined): Reader => {
  const argv = pinned(cpus, [NODE, join(ROOT, "test/bench/streamReader.ts")])
  const child = track(spawn(argv[0]!, argv.slice(1), { cwd: ROOT, stdio: ["ignore", "inherit", "inherit", "ipc"] }))
  const waiting: Array<{ readonly type: string; readonly done: (reply: ReaderReply) => void }> = []
  child.on("message", (reply: ReaderReply) => {
    const i = waiting.findIndex((w) => w.type === reply.type)
    if (i !== -1) waiting.splice(i, 1)[0]!.done(reply)
  })
  child.once("exit", (code) => {
    if (waiting.length > 0) for (const w of waiting.splice(0)) w.done({ type: "opened", open: 0, refused: {}, failed: -1 })
    if (code !== 0 && code !== null) process.stderr.write(`stream reader ${index} exited with ${code}\n`)
  })
  const ask = <T extends ReaderReply["type"]>(command: ReaderCommand, answer: T) =>
    new Promise<Extract<ReaderReply, { type: T }>>((done) => {
      waiting.push({ type: answer, done: done as (reply: ReaderReply) => void })
      child.send(command)
    })
  return { child, addressBase: `127.${20 + index}`, ask }
}

/** The service's first stream, read by hand: its head, and a first price event from Coinbase (the feed is live). */
const probe = (port: number, timeoutMs = 30_000) =>
  new Promise<{ readonly contentType: string; readonly firstPrice: string }>((done, reject) => {
    const req = request({ host: HOST, port, path: PATH, agent: false, headers: { accept: "text/event-stream" } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`GET ${PATH}: ${res.statusCode}`))
      let text = ""
      res.on("data", (chunk: Buffer) => {
        text += chunk.toString("utf8")
        const events = text.split("\n\n").filter((e) => e.includes("event: price") && e.includes('"source":"coinbase"'))
        if (events.length === 0) return
        clearTimeout(timer)
        done({ contentType: String(res.headers["content-type"]), firstPrice: events[0]!.split("\n").find((l) => l.startsWith("data: "))!.slice(6) })
        req.destroy()
      })
    })
    const timer = setTimeout(() => req.destroy(new Error(`no price event from Coinbase within ${timeoutMs} ms`)), timeoutMs)
    req.on("error", reject)
    req.end()
  })

/** The hub's own counts (src/observability/metrics.ts), from the service's metrics listener. */
const hubCounts = async (metricsPort: number) => {
  const text = await (await fetch(`http://${HOST}:${metricsPort}/metrics`)).text()
  const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, "m").exec(text)?.[1] ?? 0)
  return { open: value("live_streams_open"), events: value("live_stream_events_total"), lagging: value("live_streams_closed_lagging_total") }
}

/** Value at quantile q of a histogram of [ms, count] pairs. */
const quantile = (lags: ReadonlyArray<readonly [number, number]>, total: number, q: number) => {
  let seen = 0
  for (const [ms, n] of lags) if ((seen += n) >= q * total) return ms
  return lags.at(-1)?.[0] ?? 0
}

const merge = (reports: ReadonlyArray<ReaderReport>) => {
  const lags = new Map<number, number>()
  for (const r of reports) for (const [ms, n] of r.lags) lags.set(ms, (lags.get(ms) ?? 0) + n)
  const sorted = [...lags].sort((a, b) => a[0] - b[0])
  const sum = (f: (r: ReaderReport) => number) => reports.reduce((n, r) => n + f(r), 0)
  const events = sum((r) => r.events)
  return {
    open: sum((r) => r.open),
    events,
    lagMs: { p50: quantile(sorted, events, 0.5), p99: quantile(sorted, events, 0.99), max: Math.max(0, ...reports.map((r) => r.maxLagMs)) },
    snapshots: sum((r) => r.snapshots),
    comments: sum((r) => r.comments),
    closedByService: sum((r) => r.closedByService),
    unserved: sum((r) => r.failed + Object.values(r.refused).reduce((a, b) => a + b, 0)),
    refused: reports.reduce<Record<string, number>>((all, r) => {
      for (const [status, n] of Object.entries(r.refused)) all[status] = (all[status] ?? 0) + n
      return all
    }, {}),
    idsOutOfOrder: sum((r) => r.idsOutOfOrder),
    readerLoopDelayMs: { p99: Math.max(0, ...reports.map((r) => r.loopDelayMs.p99)), max: Math.max(0, ...reports.map((r) => r.loopDelayMs.max)) }
  }
}

export const runStreamMode = async (opts: Options) => {
  const levels = [...opts.streamLevels].sort((a, b) => a - b)
  const most = levels.at(-1)!
  const budgetSec = 240 + levels.length * (opts.warmup + opts.duration + 180)
  setTimeout(() => {
    process.stderr.write(`bench --stream: overall time limit of ${budgetSec} s reached, stopping\n`)
    process.kill(process.pid, "SIGTERM")
  }, budgetSec * 1000).unref()
  if (opts.loadCpus !== undefined) spawnSync("taskset", ["-pc", opts.loadCpus, String(process.pid)], { stdio: "ignore" })
  const started = new Date()
  const stamp = started.toISOString().replace(/\.\d+Z$/, "Z").replaceAll(":", "-")
  const tmp = mkdtempSync(join(tmpdir(), "bench-stream-"))
  cleanups.push(() => rmSync(tmp, { recursive: true, force: true }))
  const upstream = await startUpstream(opts.loadCpus)
  cleanups.push(() => void upstream.close())
  const coinbase = await startCoinbaseEmulator({ host: HOST, feed: { tickEveryMs: 1_000 / TICKS_PER_SECOND, dropEvery: 0 } })
  cleanups.push(() => void coinbase.close())
  const metricsPort = await freePort()
  const service = await startService({
    serverCpus: opts.serverCpus,
    dataDir: join(tmp, "data"),
    upstreamUrl: upstream.url,
    logPath: join(tmp, "service-stdout.log"),
    profDir: undefined,
    env: { RATES_FALLBACK: "coinbase", COINBASE_BASE_URL: coinbase.url, COINBASE_WS_URL: coinbase.wsUrl, LIVE_STREAMS_MAX: String(most + 100), LIVE_STREAMS_PER_ADDRESS: String(PER_ADDRESS), METRICS_PORT: String(metricsPort) }
  })
  const pid = service.child.pid!
  const initialLoad = loadAverage()
  process.stdout.write(
    `stream mode: node ${process.version}, load average ${initialLoad}; service pid ${pid} on ${HOST}:${service.port} (CPU ${opts.serverCpus ?? "any"}), ` +
      `${opts.readers} readers (CPU ${opts.loadCpus ?? "any"}); Coinbase feed ticking ${PAIRS.join(", ")} ${TICKS_PER_SECOND}× a second; ` +
      `GET ${PATH}; levels ${levels.map(fmtInt).join(", ")}; warm-up ${opts.warmup} s, window ${opts.duration} s\n`
  )
  // The feed live for the three pairs, then one stream read by hand: the wire as the readers expect it.
  for (const until = Date.now() + 30_000; PAIRS.some((id) => (coinbase.stats().feed.byProduct[id]?.subscribers ?? 0) === 0);) {
    if (Date.now() > until) fail(`the service did not subscribe to ${PAIRS.join(", ")} on the feed within 30 s`)
    await sleep(100)
  }
  const first = await probe(service.port)
  if (!first.contentType.startsWith("text/event-stream")) fail(`the stream's content-type is ${first.contentType}`)
  await sleep(2_000)
  const idle = readMem(pid)!
  process.stdout.write(`probe: ${first.contentType}, first price ${first.firstPrice}; idle RSS ${mib(idle.rssKiB)} MiB\n`)

  const readers = Array.from({ length: opts.readers }, (_, i) => startReader(i, opts.loadCpus))
  cleanups.push(() => {
    for (const r of readers) r.child.kill("SIGKILL")
  })
  const rows: Array<StreamLevel> = []
  let held = 0
  let before = merge([])
  for (const level of levels) {
    const reset = resetPeak(pid)
    const sampler = new RssSampler(pid).start()
    const more = level - held
    process.stdout.write(`level ${fmtInt(level)}: opening ${fmtInt(more)} more streams...`)
    const t0 = performance.now()
    await Promise.all(readers.map((r, i) => {
      const count = Math.floor(more / readers.length) + (i < more % readers.length ? 1 : 0)
      return r.ask({ type: "open", count, host: HOST, port: service.port, path: PATH, addressBase: r.addressBase, perAddress: PER_ADDRESS, concurrency: 32 }, "opened")
    }))
    const openSeconds = round((performance.now() - t0) / 1000, 1)
    process.stdout.write(` in ${openSeconds} s; warm-up ${opts.warmup} s...`)
    await sleep(opts.warmup * 1000)
    const load = loadAverage()
    await Promise.all(readers.map((r) => r.ask({ type: "mark" }, "marked")))
    const cpu0 = cpuMs(pid) ?? 0
    const wait0 = runQueueWaitMs(pid) ?? 0
    const readersCpu0 = readers.reduce((n, r) => n + (cpuMs(r.child.pid!) ?? 0), 0)
    const ownCpu0 = process.cpuUsage()
    const calls0 = await upstream.totalCalls()
    const ticks0 = ticksMade(coinbase)
    const hub0 = await hubCounts(metricsPort)
    const readersWait0 = readers.map((r) => runQueueWaitMs(r.child.pid!) ?? 0)
    const w0 = performance.now()
    await sleep(opts.duration * 1000)
    const reports = await Promise.all(readers.map((r) => r.ask({ type: "report" }, "report")))
    const seconds = (performance.now() - w0) / 1000
    const cpu = ((cpuMs(pid) ?? 0) - cpu0) / 1000 / seconds
    const waited = ((runQueueWaitMs(pid) ?? 0) - wait0) / 1000 / seconds
    const readersCpu = (readers.reduce((n, r) => n + (cpuMs(r.child.pid!) ?? 0), 0) - readersCpu0) / 1000 / seconds
    const own = process.cpuUsage(ownCpu0)
    const upstreamCalls = (await upstream.totalCalls()) - calls0
    const ticks = ticksMade(coinbase) - ticks0
    const hub1 = await hubCounts(metricsPort)
    const readersWaited = Math.max(...readers.map((r, i) => (runQueueWaitMs(r.child.pid!) ?? 0) - readersWait0[i]!)) / 1000 / seconds
    const rss = readMem(pid)!
    const peak = sampler.stop(reset)
    const now = merge(reports)
    rows.push(levelRow(level, seconds, now, before, { cpu, readersCpu, emulatorsCpu: (own.user + own.system) / 1e6 / seconds, idle: idle.rssKiB, rss: rss.rssKiB, peak, load, openSeconds, upstreamCalls, waited, ticks, readersWaited, hub: { open: hub1.open, events: hub1.events - hub0.events, lagging: hub1.lagging } }))
    process.stdout.write(` ${fmtInt(now.open)} held, ${fmtInt(now.events / seconds)} events/s, lag p99 ${now.lagMs.p99} ms\n`)
    held = level
    before = now
  }
  await Promise.all(readers.map((r) => (r.child.send({ type: "close" } satisfies ReaderCommand), stopChild(r.child, 10_000))))
  // What the service gives back once its streams are gone.
  await sleep(5_000)
  const afterClose = readMem(pid)!
  const hubAfterClose = await hubCounts(metricsPort)
  const serviceExit = await stopChild(service.child, 15_000)

  printStreamTable(rows, {
    notes: `events/s ideal = held × the trades the feed made of the ${COINS} pairs a second (${COINS} × ${TICKS_PER_SECOND} when on time); lag = reader's receipt − the event's at ` +
      `(the feed's tick time), whole ms; CPU in cores over the ${opts.duration} s window, (waited): the share of it the service's main thread was ready to run ` +
      `but waiting for a CPU taken by other work (/proc/PID/schedstat); readers' waited and loop delay: the worst reader's (a late reader adds to the lag it ` +
      `measures); CoinGecko calls: the emulator's, during the window (the majors are Coinbase's: none expected); idle RSS ${mib(idle.rssKiB)} MiB (before any ` +
      `stream); load = 1-min load average at the window's start; service exit ${serviceExit}.`,
    afterClose: { open: hubAfterClose.open, rssAboveIdleMiB: mib(afterClose.rssKiB - idle.rssKiB) },
    goal: GOAL
  })
  const json = `${JSON.stringify({ startedAt: started.toISOString(), node: process.version, path: PATH, readers: opts.readers, warmupSec: opts.warmup, durationSec: opts.duration, idleRssMiB: mib(idle.rssKiB), rssAboveIdleAfterCloseMiB: mib(afterClose.rssKiB - idle.rssKiB), openAfterClose: hubAfterClose.open, initialLoad, levels: rows }, null, 2)}\n`
  mkdirSync(opts.out, { recursive: true })
  const file = join(opts.out, `stream-${stamp}.json`)
  writeFileSync(file, json)
  writeFileSync(join(opts.out, "stream-latest.json"), json)
  process.stdout.write(`wrote ${relative(ROOT, file)} and ${relative(ROOT, join(opts.out, "stream-latest.json"))}\n`)
}

type Merged = ReturnType<typeof merge>

/** Trades made of the three pairs: ticker messages sent over the connections subscribed to each. */
const ticksMade = (coinbase: Awaited<ReturnType<typeof startCoinbaseEmulator>>) =>
  PAIRS.reduce((n, id) => {
    const p = coinbase.stats().feed.byProduct[id]
    return n + (p === undefined || p.subscribers === 0 ? 0 : p.ticks / p.subscribers)
  }, 0)

/** A level's figures: the window's counts, and the since-the-start counts less those of the level before. */
const levelRow = (
  asked: number,
  seconds: number,
  now: Merged,
  before: Merged,
  m: { cpu: number; readersCpu: number; emulatorsCpu: number; idle: number; rss: number; peak: number; load: number; openSeconds: number; upstreamCalls: number; waited: number; ticks: number; readersWaited: number
    hub: { open: number; events: number; lagging: number }
  }
): StreamLevel => ({
  asked,
  held: now.open,
  openSeconds: m.openSeconds,
  windowSeconds: round(seconds, 2),
  events: now.events,
  eventsPerSecond: round(now.events / seconds, 1),
  ticksPerSecond: round(m.ticks / seconds, 2),
  idealPerSecond: Math.round((now.open * m.ticks) / seconds),
  lagMs: now.lagMs,
  snapshots: now.snapshots,
  heartbeats: now.comments,
  idsOutOfOrder: now.idsOutOfOrder - before.idsOutOfOrder,
  readerLoopDelayMs: now.readerLoopDelayMs,
  readersRunQueueWait: round(m.readersWaited, 3),
  serviceCpuCores: round(m.cpu, 3),
  serviceRunQueueWait: round(m.waited, 3),
  readersCpuCores: round(m.readersCpu, 3),
  emulatorsCpuCores: round(m.emulatorsCpu, 3),
  rssMiB: mib(m.rss),
  rssAboveIdleMiB: mib(m.rss - m.idle),
  peakRssAboveIdleMiB: mib(m.peak - m.idle),
  closedByService: now.closedByService - before.closedByService,
  unserved: now.unserved - before.unserved,
  refused: Object.fromEntries(Object.entries(now.refused).map(([s, n]) => [s, n - (before.refused[s] ?? 0)]).filter(([, n]) => (n as number) > 0)),
  coinGeckoCalls: m.upstreamCalls,
  hub: { open: m.hub.open, eventsPerSecond: round(m.hub.events / seconds, 1), closedLagging: m.hub.lagging },
  loadAverage1m: m.load
})
