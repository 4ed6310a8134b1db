/**
 * A Coinbase Exchange emulator: the documented public market data our second source uses, its public
 * rate limit, and switchable faults, so the client can be tested over real HTTP.
 *
 *   node test/emulators/coinbase.ts --port 4102 [--now ISO] [--tick-every-ms 1000]
 *   prints one JSON line: {"emulator":"coinbase","url":"http://127.0.0.1:4102","control":"…/__control",
 *   "ws":"ws://127.0.0.1:4102/ws-feed"}
 *
 * API (keyless, at the root like api.exchange.coinbase.com):
 *   GET /products                      every product (online, delisted, trading disabled), or those set listed
 *   GET /products/{id}/candles         ?granularity=60|300|900|3600|21600|86400&start&end (ISO 8601 or
 *                                      epoch seconds; without both, the 300 buckets ending now):
 *                                      [[time_s, low, high, open, close, volume], …] newest first; more
 *                                      than 300 buckets → 400; buckets without trades are missing
 *                                      (XTZ-EUR skips some days; NEAR-EUR has only its last 100 days)
 *   GET /products/{id}/ticker          {price, time, bid, ask, volume, trade_id, size}, prices as strings
 *   GET /products/{id}/stats           {open, high, low, last, volume, volume_30day}, strings
 *   unknown product or path            404 {"message":"NotFound"}
 * Every API answer has a `Date` header from the emulator's clock (frozen or real), as Coinbase's own.
 * Public limit: 10 requests/s per address, bursts to 15 (a token bucket), then 429
 * {"message":"Public rate limit exceeded"}. Errors are `{"message": …}`. The answers: coinbase-answers.ts;
 * their prices: coinbase-data.ts.
 * WebSocket feed (wss://ws-feed.exchange.coinbase.com) at ws://…/ws-feed (`wsUrl`), protocol in coinbase-feed.ts:
 *   a "subscribe" within 5 s (channels "ticker", "heartbeat") → "subscriptions", or an "error" message
 *   ("FOO-USD is not a valid product"); then `ticker` messages (the REST ticker's and stats' numbers at the
 *   clock's `now`, as strings; `open_24h` the price 24 h before) and heartbeats, every second per product;
 *   at most 200 products a connection and 100 connections.
 * Control (not rate-limited):
 *   POST /__control  {"mode": "none"|"5xx"|"429"|"hang"|"reset"|"truncated"|"wrong-shape",
 *                     "paths"?: ["/products/BTC-USD", "/products$" (exactly)], "times"?: n, "status"?: 5xx,
 *                     "latency"?: {"/products": ms}, "now"?: ISO | null, "resetStats"?: true, "listed"?: [ids] | null,
 *                     "rateLimit"?: false | true (on again: every address starts with a full bucket),
 *                     "feed"?: "normal"|"disconnect" (close all now)|"refuse" (upgrades 503)|"silent" (send nothing)|
 *                              "numeric-ticks" (decimals as JSON numbers)|"cut-off" (closed once subscribed),
 *                     "feedRefuses"?: [ids] (the feed refuses them: "… is not a valid product")}
 *   GET  /__stats    {"total": n, "byPath": {"/products/BTC-USD/candles": n, …}, "byStatus": {"200": n, "429": n},
 *                     "maxInFlight": n, "callers": {"byUserAgent": {…}, "traced": n},
 *                     "feed": {connections, subscribes, ticks, heartbeats, byProduct, callers, …}}
 *   GET  /__published?product=BTC-USD  what the feed published of it: {"trades": [{tradeId, price, time}], "heartbeats":
 *                     [{lastTradeId, time}]}, times in epoch ms, each list its last 10,000 (reset with the stats)
 * A call without a User-Agent gets 400 {"message":"User-Agent header is required."}, as Coinbase answers.
 * Imported: `startCoinbaseEmulator({ port?, host?, now?, rateLimit?, feed?: { tickEveryMs?, … } })`.
 * Runs on Node's type stripping: erasable TypeScript only, local imports with `.ts`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"
import { type CallersStats, makeCallers, userAgentOf } from "./callers.ts"
import { type CoinbaseFeedMode, type CoinbaseFeedOptions, type CoinbaseFeedStats, COINBASE_FEED_PATH, createCoinbaseFeed } from "./coinbase-feed.ts"
import { answer } from "./coinbase-answers.ts"
import type { PublishedRecord } from "./coinbase-feed-ticks.ts"

export const coinbaseFaultModes = ["none", "5xx", "429", "hang", "reset", "truncated", "wrong-shape"] as const
export type CoinbaseFaultMode = (typeof coinbaseFaultModes)[number]

export interface CoinbaseFault {
  readonly mode: CoinbaseFaultMode
  /** Path prefixes the fault applies to ("/products$": that path only); all API paths when absent. */
  readonly paths?: ReadonlyArray<string>
  /** Apply to the next n matching calls only. */
  readonly times?: number
  /** Status of mode "5xx" (default 503). */
  readonly status?: number
}

export interface CoinbaseEmulatorStats {
  readonly total: number
  /** API calls per path, refused and faulted ones included. */
  readonly byPath: Readonly<Record<string, number>>
  /** API answers per status ("0": none, a hang or a reset). */
  readonly byStatus: Readonly<Record<string, number>>
  /** Most API calls being answered at the same time. */
  readonly maxInFlight: number
  /** Who called the REST API: User-Agents, and calls that carried trace headers (callers.ts). */
  readonly callers: CallersStats
  readonly feed: CoinbaseFeedStats
}

export interface CoinbaseEmulator {
  /** Base URL to use as COINBASE_BASE_URL, e.g. http://127.0.0.1:40123 */
  readonly url: string
  readonly port: number
  /** The WebSocket feed, e.g. ws://127.0.0.1:40123/ws-feed (COINBASE_WS_URL). */
  readonly wsUrl: string
  /** The feed's faults: "disconnect" closes every connection now; the others stand until "normal". */
  setFeed(mode: CoinbaseFeedMode): void
  /** Products the feed refuses ("… is not a valid product") although the REST API lists them. */
  setFeedRefuses(ids: ReadonlyArray<string>): void
  /** A trade and a heartbeat of every subscribed product now (a simulated clock's step; the timers keep theirs). */
  publishFeed(): void
  /** What the feed published of a product: its last trades sent and heartbeats (coinbase-feed.ts). */
  feedPublished(productId: string): PublishedRecord
  setFault(fault: CoinbaseFaultMode | CoinbaseFault): void
  /** Delay answers on paths starting with `pathPrefix`; 0 removes it. */
  setLatency(pathPrefix: string, ms: number): void
  /** Freeze the clock (epoch ms), or undefined for the real clock. */
  setNow(epochMs: number | undefined): void
  /** Turn the public rate limit on (every address starts again with a full bucket) or off; on by default. */
  setRateLimit(on: boolean): void
  /** `/products` lists only these ids (`[]`: none, as a faulty Coinbase might), or every product (undefined). */
  setListed(ids: ReadonlyArray<string> | undefined): void
  resetStats(): void
  stats(): CoinbaseEmulatorStats
  close(): Promise<void>
}

export interface CoinbaseEmulatorOptions {
  readonly port?: number
  readonly host?: string
  /** A fixed clock (epoch ms) for reproducible answers. */
  readonly now?: number
  /** The public rate limit (default on). */
  readonly rateLimit?: boolean
  /** The WebSocket feed's cadence, deadline and bounds (coinbase-feed.ts). */
  readonly feed?: CoinbaseFeedOptions
}

/** Coinbase's public limit: 10 a second, bursts to 15. */
const RATE_PER_SECOND = 10
const BURST = 15

const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

export const startCoinbaseEmulator = (options: CoinbaseEmulatorOptions = {}): Promise<CoinbaseEmulator> => {
  let fault: CoinbaseFault = { mode: "none" }
  let faultsLeft: number | undefined
  let frozenNow = options.now
  let rateLimited = options.rateLimit ?? true
  let listed: ReadonlySet<string> | undefined
  const latency = new Map<string, number>()
  const buckets = new Map<string, { tokens: number; at: number }>()
  let byPath: Record<string, number> = {}
  let byStatus: Record<string, number> = {}
  let total = 0
  let inFlight = 0
  let maxInFlight = 0
  const callers = makeCallers()

  const setFault = (next: CoinbaseFaultMode | CoinbaseFault) => {
    const parsed = typeof next === "string" ? { mode: next } : next
    if (!coinbaseFaultModes.includes(parsed.mode)) throw new Error(`unknown fault mode ${String(parsed.mode)}`)
    fault = parsed
    faultsLeft = parsed.times
  }
  const setLatency = (prefix: string, ms: number) => {
    if (!(ms > 0)) latency.delete(prefix)
    else latency.set(prefix, ms)
  }
  const setRateLimit = (on: boolean) => {
    rateLimited = on
    buckets.clear()
  }
  const feed = createCoinbaseFeed(() => now(), options.feed)
  const resetStats = () => {
    feed.resetStats()
    byPath = {}
    byStatus = {}
    total = 0
    maxInFlight = inFlight
    callers.reset()
  }
  const stats = (): CoinbaseEmulatorStats => ({
    total,
    byPath: { ...byPath },
    byStatus: { ...byStatus },
    maxInFlight,
    callers: callers.stats(),
    feed: feed.stats()
  })
  const now = () => frozenNow ?? Date.now()

  /** The address's token bucket, on the real clock (a frozen `now` is for prices only). */
  const admitted = (address: string) => {
    if (!rateLimited) return true
    const at = performance.now()
    const bucket = buckets.get(address) ?? { tokens: BURST, at }
    bucket.tokens = Math.min(BURST, bucket.tokens + ((at - bucket.at) / 1000) * RATE_PER_SECOND)
    bucket.at = at
    buckets.set(address, bucket)
    if (bucket.tokens < 1) return false
    bucket.tokens -= 1
    return true
  }

  const faultFor = (path: string): CoinbaseFault | undefined => {
    if (fault.mode === "none") return undefined
    if (fault.paths !== undefined && !fault.paths.some((prefix) => prefix.endsWith("$") ? path === prefix.slice(0, -1) : path.startsWith(prefix))) {
      return undefined
    }
    if (faultsLeft !== undefined) {
      if (faultsLeft <= 0) return undefined
      faultsLeft--
    }
    return fault
  }

  const handleControl = async (req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams) => {
    if (path === "/__stats" && req.method === "GET") return sendJson(res, 200, stats())
    if (path === "/__published" && req.method === "GET") return sendJson(res, 200, feed.published(query.get("product") ?? ""))
    if (path !== "/__control" || req.method !== "POST") return sendJson(res, 404, { message: "NotFound" })
    let body: Record<string, unknown>
    try {
      const chunks: Array<Buffer> = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>
    } catch {
      return sendJson(res, 400, { message: "control body must be JSON" })
    }
    try {
      if (body.mode !== undefined) setFault(body as unknown as CoinbaseFault)
      if (body.latency !== undefined) {
        for (const [prefix, ms] of Object.entries(body.latency as Record<string, number>)) setLatency(prefix, ms)
      }
      if (body.now !== undefined) frozenNow = body.now === null ? undefined : Date.parse(String(body.now))
      if (body.resetStats === true) resetStats()
      if (typeof body.rateLimit === "boolean") setRateLimit(body.rateLimit)
      if (body.listed !== undefined) listed = body.listed === null ? undefined : new Set(body.listed as Array<string>)
      if (body.feed !== undefined) feed.setMode(body.feed as CoinbaseFeedMode)
      if (Array.isArray(body.feedRefuses)) feed.setRefusedProducts(body.feedRefuses as Array<string>)
    } catch (error) {
      return sendJson(res, 400, { message: String(error) })
    }
    const state = { fault, latency: Object.fromEntries(latency), now: new Date(now()).toISOString(), rateLimit: rateLimited }
    return sendJson(res, 200, { ...state, feed: feed.stats().mode })
  }

  const handleApi = async (req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams) => {
    total++
    byPath[path] = (byPath[path] ?? 0) + 1
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
    res.setHeader("date", new Date(now()).toUTCString())
    let status = 0
    res.on("close", () => {
      inFlight--
      byStatus[status] = (byStatus[status] ?? 0) + 1
    })
    const reply = (code: number, body: unknown) => {
      status = code
      sendJson(res, code, body)
    }
    callers.note(req)
    if (userAgentOf(req) === undefined) return reply(400, { message: "User-Agent header is required." })
    if (!admitted(req.socket.remoteAddress ?? "")) return reply(429, { message: "Public rate limit exceeded" })

    const delay = [...latency].find(([prefix]) => path.startsWith(prefix))?.[1]
    if (delay !== undefined) await new Promise((resolve) => setTimeout(resolve, delay))

    if (req.method !== "GET") return reply(405, { message: "method not allowed" })
    const active = faultFor(path)
    switch (active?.mode) {
      case "5xx":
        return reply(active.status ?? 503, { message: "Service Unavailable" })
      case "429":
        return reply(429, { message: "Public rate limit exceeded" })
      case "hang":
        return // never answers; close() ends the connection
      case "reset":
        return req.socket.destroy()
      default:
        break
    }
    const result = answer(path, query, now(), listed)
    if (active?.mode === "truncated" && result.status === 200) {
      const text = JSON.stringify(result.body)
      status = 200
      res.writeHead(200, { "content-type": "application/json; charset=utf-8" })
      return res.end(text.slice(0, Math.max(1, Math.floor(text.length / 2))))
    }
    if (active?.mode === "wrong-shape" && result.status === 200) return reply(200, { data: result.body })
    return reply(result.status, result.body)
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://emulator.invalid")
    const task = url.pathname.startsWith("/__")
      ? handleControl(req, res, url.pathname, url.searchParams)
      : handleApi(req, res, url.pathname, url.searchParams)
    task.catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { message: String(error) })
      else res.destroy()
    })
  })
  server.on("upgrade", feed.handleUpgrade)

  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      const address = server.address() as AddressInfo
      const host = address.family === "IPv6" ? `[${address.address}]` : address.address
      resolve({
        url: `http://${host}:${address.port}`,
        port: address.port,
        wsUrl: `ws://${host}:${address.port}${COINBASE_FEED_PATH}`,
        setFeed: feed.setMode,
        setFeedRefuses: feed.setRefusedProducts,
        publishFeed: feed.publish,
        feedPublished: feed.published,
        setFault,
        setLatency,
        setNow: (epochMs) => {
          frozenNow = epochMs
        },
        setRateLimit,
        setListed: (ids) => void (listed = ids === undefined ? undefined : new Set(ids)),
        resetStats,
        stats,
        close: () =>
          new Promise<void>((done) => {
            feed.close()
            server.close(() => done())
            // Hanging requests would keep close() waiting forever.
            server.closeAllConnections()
          })
      })
    })
  })
}

// Standalone: node test/emulators/coinbase.ts --port 4102 [--now 2026-11-22T10:00:00Z]
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const argument = (name: string) => {
    const i = process.argv.indexOf(name)
    return i === -1 ? undefined : process.argv[i + 1]
  }
  const nowArg = argument("--now")
  const tickArg = argument("--tick-every-ms")
  const emulator = await startCoinbaseEmulator({
    port: Number(argument("--port") ?? 4102),
    ...(nowArg === undefined ? {} : { now: Date.parse(nowArg) }),
    ...(tickArg === undefined ? {} : { feed: { tickEveryMs: Number(tickArg) } })
  })
  // One JSON line, like the other emulators in this repo, so scripts can read the URLs.
  const control = `${emulator.url}/__control`
  process.stdout.write(`${JSON.stringify({ emulator: "coinbase", url: emulator.url, control, ws: emulator.wsUrl })}\n`)
  const stop = () => void emulator.close().then(() => process.exit(0))
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
}
