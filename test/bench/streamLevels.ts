/**
 * The stream mode's levels held against one server (streamMode.ts): the service or the raw baseline
 * (streamRaw.ts). Reader processes (streamReader.ts, on --load-cpus), 100 streams from each of their local
 * addresses (127.N.x.y), open the stream up to each level in turn (the streams of a level stay open into the
 * next), and after a warm-up count for --duration seconds; the server's CPU and RSS are read from /proc.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { request } from "node:http"
import { join } from "node:path"
import { fail, fmtInt, HOST, mib, NODE, ROOT, round, sleep } from "./common.ts"
import type { Options } from "./options.ts"
import { cleanups, pinned, stopChild, track } from "./processes.ts"
import type { ServerKind, StreamLevel } from "./streamReport.ts"
import type { ReaderCommand, ReaderReply, ReaderReport } from "./streamReader.ts"
import { cpuMs, loadAverage, readMem, resetPeak, RssSampler, runQueueWaitMs } from "./system.ts"
import type { Upstream } from "./upstream.ts"
import type { startCoinbaseEmulator } from "../emulators/coinbase.ts"

export const PATH = "/api/v1/prices/stream?cryptos=BTC,ETH,SOL"
export const PAIRS = ["BTC-USD", "ETH-USD", "SOL-USD"]
/** Streams opened from one local address: the service's shipped LIVE_STREAMS_PER_ADDRESS (and under MAX_CONNECTIONS_PER_ADDRESS). */
export const PER_ADDRESS = 100

type Coinbase = Awaited<ReturnType<typeof startCoinbaseEmulator>>

/** The server a run of levels holds streams of; `hub`: its own counts (the service's /metrics), if it has any. */
export interface StreamTarget {
  readonly server: ServerKind
  readonly child: ChildProcess
  readonly port: number
  readonly hub: (() => Promise<{ readonly open: number; readonly events: number; readonly lagging: number }>) | undefined
}

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

/** A server's first stream, read by hand: its head, and a first price event from Coinbase (the feed is live). */
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

type Merged = ReturnType<typeof merge>

/** Trades made of the three pairs: ticker messages sent over the connections subscribed to each. */
const ticksMade = (coinbase: Coinbase) =>
  PAIRS.reduce((n, id) => {
    const p = coinbase.stats().feed.byProduct[id]
    return n + (p === undefined || p.subscribers === 0 ? 0 : p.ticks / p.subscribers)
  }, 0)

/** What one server's levels gave: its idle RSS (KiB), a row per level, and what it kept once every stream closed. */
export interface HeldLevels {
  readonly idleKiB: number
  readonly rows: ReadonlyArray<StreamLevel>
  readonly afterClose: { readonly open: number | undefined; readonly rssAboveIdleMiB: number }
}

/** The feed live for the three pairs (one subscriber: this server), one stream read by hand, the idle RSS, then each level. */
export const holdLevels = async (opts: Options, target: StreamTarget, coinbase: Coinbase, upstream: Upstream): Promise<HeldLevels> => {
  const pid = target.child.pid!
  for (const until = Date.now() + 30_000; PAIRS.some((id) => (coinbase.stats().feed.byProduct[id]?.subscribers ?? 0) !== 1);) {
    if (Date.now() > until) fail(`the ${target.server} did not subscribe (alone) to ${PAIRS.join(", ")} on the feed within 30 s`)
    await sleep(100)
  }
  const first = await probe(target.port)
  if (!first.contentType.startsWith("text/event-stream")) fail(`the ${target.server}'s stream's content-type is ${first.contentType}`)
  await sleep(2_000)
  const idle = readMem(pid)!
  process.stdout.write(`${target.server}: pid ${pid} on ${HOST}:${target.port}; probe: ${first.contentType}, first price ${first.firstPrice}; idle RSS ${mib(idle.rssKiB)} MiB\n`)

  const readers = Array.from({ length: opts.readers }, (_, i) => startReader(i, opts.loadCpus))
  cleanups.push(() => {
    for (const r of readers) r.child.kill("SIGKILL")
  })
  const rows: Array<StreamLevel> = []
  let held = 0
  let before = merge([])
  for (const level of [...opts.streamLevels].sort((a, b) => a - b)) {
    const reset = resetPeak(pid)
    const sampler = new RssSampler(pid).start()
    const more = level - held
    process.stdout.write(`${target.server} level ${fmtInt(level)}: opening ${fmtInt(more)} more streams...`)
    const t0 = performance.now()
    await Promise.all(readers.map((r, i) => {
      const count = Math.floor(more / readers.length) + (i < more % readers.length ? 1 : 0)
      return r.ask({ type: "open", count, host: HOST, port: target.port, path: PATH, addressBase: r.addressBase, perAddress: PER_ADDRESS, concurrency: 32 }, "opened")
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
    const hub0 = await target.hub?.()
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
    const hub1 = await target.hub?.()
    const readersWaited = Math.max(...readers.map((r, i) => (runQueueWaitMs(r.child.pid!) ?? 0) - readersWait0[i]!)) / 1000 / seconds
    const rss = readMem(pid)!
    const peak = sampler.stop(reset)
    const now = merge(reports)
    const hub = hub0 === undefined || hub1 === undefined ? undefined : { open: hub1.open, events: hub1.events - hub0.events, lagging: hub1.lagging }
    rows.push(levelRow(target.server, level, seconds, now, before, { cpu, readersCpu, emulatorsCpu: (own.user + own.system) / 1e6 / seconds, idle: idle.rssKiB, rss: rss.rssKiB, peak, load, openSeconds, upstreamCalls, waited, ticks, readersWaited, hub }))
    process.stdout.write(` ${fmtInt(now.open)} held, ${fmtInt(now.events / seconds)} events/s, lag p99 ${now.lagMs.p99} ms\n`)
    held = level
    before = now
  }
  await Promise.all(readers.map((r) => (r.child.send({ type: "close" } satisfies ReaderCommand), stopChild(r.child, 10_000))))
  // What the server gives back once its streams are gone.
  await sleep(5_000)
  const afterClose = readMem(pid)!
  return { idleKiB: idle.rssKiB, rows, afterClose: { open: (await target.hub?.())?.open, rssAboveIdleMiB: mib(afterClose.rssKiB - idle.rssKiB) } }
}

/** A level's figures: the window's counts, and the since-the-start counts less those of the level before. */
const levelRow = (
  server: ServerKind,
  asked: number,
  seconds: number,
  now: Merged,
  before: Merged,
  m: { cpu: number; readersCpu: number; emulatorsCpu: number; idle: number; rss: number; peak: number; load: number; openSeconds: number; upstreamCalls: number; waited: number; ticks: number; readersWaited: number
    hub: { open: number; events: number; lagging: number } | undefined
  }
): StreamLevel => ({
  server,
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
  serverCpuCores: round(m.cpu, 3),
  serverRunQueueWait: round(m.waited, 3),
  readersCpuCores: round(m.readersCpu, 3),
  emulatorsCpuCores: round(m.emulatorsCpu, 3),
  rssMiB: mib(m.rss),
  rssAboveIdleMiB: mib(m.rss - m.idle),
  peakRssAboveIdleMiB: mib(m.peak - m.idle),
  closedByServer: now.closedByService - before.closedByService,
  unserved: now.unserved - before.unserved,
  refused: Object.fromEntries(Object.entries(now.refused).map(([s, n]) => [s, n - (before.refused[s] ?? 0)]).filter(([, n]) => (n as number) > 0)),
  coinGeckoCalls: m.upstreamCalls,
  hub: m.hub === undefined ? undefined : { open: m.hub.open, eventsPerSecond: round(m.hub.events / seconds, 1), closedLagging: m.hub.lagging },
  loadAverage1m: m.load
})
