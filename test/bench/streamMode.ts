/**
 * `npm run bench -- --stream [--streams 1000,5000,10000] [--duration 20] [--warmup 5] [--readers 4]` (issue 41):
 * live price streams held by the service, and by a raw `node:http` baseline in the same invocation. The service
 * as `npm start` runs it (servers.ts, pinned on --server-cpus), over the CoinGecko emulator and the Coinbase
 * emulator, whose feed ticks every followed pair twice a second (`tickEveryMs` 500, no trade dropped), with
 * LIVE_STREAMS_MAX raised above the largest level and the per-address limits as shipped
 * (LIVE_STREAMS_PER_ADDRESS 100, MAX_CONNECTIONS_PER_ADDRESS 256). Then, the service stopped, the raw server
 * (streamRaw.ts: the same Node, the start script's flags, the same CPUs, the same feed and wire format, no
 * limits, no edge, no coalescing). Sequentially: the service's levels first, then the raw server's, each with
 * fresh reader processes (streamLevels.ts, streamReader.ts, on --load-cpus) opening
 * `GET /api/v1/prices/stream?cryptos=BTC,ETH,SOL` up to each level in turn (1,000, then 4,000 more, ...: the
 * streams of a level stay open into the next), and after a warm-up counting for --duration seconds: streams
 * held (open at the end / asked), price events a second received (and the ideal: held × 3 coins × 2 ticks a
 * second), the lag from tick to reader (receipt less the event's `at`, the tick's time), the server's CPU
 * (/proc/PID/stat over the window, in cores) and RSS above its own idle RSS before any stream (at the window's
 * end, and the peak since the level's first open), streams the server closed and opens refused or failed.
 * The ratios service/raw of RSS above idle and CPU per level, and each one's lag, follow the table.
 * Goal (the service): 10,000 held, lag p99 ≤ 500 ms, RSS ≤ 200 MB above idle.
 * Results: tables on stdout, JSON in <out>/stream-<timestamp>.json and stream-latest.json.
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { fmtInt, HOST, mib, ROOT } from "./common.ts"
import type { Options } from "./options.ts"
import { cleanups, freePort, stopChild } from "./processes.ts"
import { startRawStream, startService } from "./servers.ts"
import { holdLevels, PAIRS, PATH, PER_ADDRESS } from "./streamLevels.ts"
import { printStreamTable, ratios } from "./streamReport.ts"
import { loadAverage } from "./system.ts"
import { startUpstream } from "./upstream.ts"
import { startCoinbaseEmulator } from "../emulators/coinbase.ts"

const COINS = 3
const TICKS_PER_SECOND = 2
const GOAL = { streams: 10_000, lagP99Ms: 500, rssAboveIdleMB: 200 }

/** The hub's own counts (src/observability/metrics.ts), from the service's metrics listener. */
const hubCounts = async (metricsPort: number) => {
  const text = await (await fetch(`http://${HOST}:${metricsPort}/metrics`)).text()
  const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, "m").exec(text)?.[1] ?? 0)
  return { open: value("live_streams_open"), events: value("live_stream_events_total"), lagging: value("live_streams_closed_lagging_total") }
}

export const runStreamMode = async (opts: Options) => {
  const levels = [...opts.streamLevels].sort((a, b) => a - b)
  const most = levels.at(-1)!
  // Two servers, one after the other.
  const budgetSec = 240 + 2 * (60 + levels.length * (opts.warmup + opts.duration + 180))
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
  const initialLoad = loadAverage()
  process.stdout.write(
    `stream mode: node ${process.version}, load average ${initialLoad}; the service, then the raw baseline (CPU ${opts.serverCpus ?? "any"}), ` +
      `${opts.readers} readers (CPU ${opts.loadCpus ?? "any"}); Coinbase feed ticking ${PAIRS.join(", ")} ${TICKS_PER_SECOND}× a second; ` +
      `GET ${PATH}; levels ${levels.map(fmtInt).join(", ")}; warm-up ${opts.warmup} s, window ${opts.duration} s\n`
  )

  const metricsPort = await freePort()
  const service = await startService({
    serverCpus: opts.serverCpus,
    dataDir: join(tmp, "data"),
    upstreamUrl: upstream.url,
    logPath: join(tmp, "service-stdout.log"),
    profDir: undefined,
    env: { RATES_FALLBACK: "coinbase", COINBASE_BASE_URL: coinbase.url, COINBASE_WS_URL: coinbase.wsUrl, LIVE_STREAMS_MAX: String(most + 100), LIVE_STREAMS_PER_ADDRESS: String(PER_ADDRESS), METRICS_PORT: String(metricsPort) }
  })
  const ofService = await holdLevels(opts, { server: "service", child: service.child, port: service.port, hub: () => hubCounts(metricsPort) }, coinbase, upstream)
  const serviceExit = await stopChild(service.child, 15_000)

  const raw = await startRawStream(opts.serverCpus, coinbase.wsUrl)
  const ofRaw = await holdLevels(opts, { server: "raw", child: raw.child, port: raw.port, hub: undefined }, coinbase, upstream)
  const rawExit = await stopChild(raw.child, 15_000)

  const rows = [...ofService.rows, ...ofRaw.rows]
  printStreamTable(rows, {
    notes: `events/s ideal = held × the trades the feed made of the ${COINS} pairs a second (${COINS} × ${TICKS_PER_SECOND} when on time); lag = reader's receipt − the event's at ` +
      `(the feed's tick time), whole ms; CPU in cores over the ${opts.duration} s window, (waited): the share of it the server's main thread was ready to run ` +
      `but waiting for a CPU taken by other work (/proc/PID/schedstat); readers' waited and loop delay: the worst reader's (a late reader adds to the lag it ` +
      `measures); CoinGecko calls: the emulator's, during the window (the majors are Coinbase's: none expected); idle RSS (before any stream) ` +
      `service ${mib(ofService.idleKiB)} MiB, raw ${mib(ofRaw.idleKiB)} MiB; load = 1-min load average at the window's start; service exit ${serviceExit}, raw exit ${rawExit}.`,
    afterClose: { service: ofService.afterClose, raw: ofRaw.afterClose },
    goal: GOAL
  })
  const json = `${JSON.stringify({
    startedAt: started.toISOString(), node: process.version, path: PATH, order: "service levels, then raw levels", readers: opts.readers, warmupSec: opts.warmup, durationSec: opts.duration,
    idleRssMiB: { service: mib(ofService.idleKiB), raw: mib(ofRaw.idleKiB) },
    rssAboveIdleAfterCloseMiB: { service: ofService.afterClose.rssAboveIdleMiB, raw: ofRaw.afterClose.rssAboveIdleMiB },
    openAfterClose: ofService.afterClose.open, initialLoad, levels: rows, ratios: ratios(rows)
  }, null, 2)}\n`
  mkdirSync(opts.out, { recursive: true })
  const file = join(opts.out, `stream-${stamp}.json`)
  writeFileSync(file, json)
  writeFileSync(join(opts.out, "stream-latest.json"), json)
  process.stdout.write(`wrote ${relative(ROOT, file)} and ${relative(ROOT, join(opts.out, "stream-latest.json"))}\n`)
}
