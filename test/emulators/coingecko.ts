/**
 * A CoinGecko-compatible emulator (the subset of API v3 our rates capability uses), with switchable
 * faults so the resilience of the client can be tested over real HTTP.
 *
 *   node test/emulators/coingecko.ts --port 4101 [--require-key KEY] [--now ISO] [--publish-delay-minutes N]
 *   prints one JSON line: {"emulator":"coingecko","url":"http://127.0.0.1:4101/api/v3","control":"…/__control"}
 *
 * API (under /api/v3): /ping, /simple/supported_vs_currencies, /coins/list, /coins/markets (ids=,
 * symbols=&include_tokens=top|all, or neither: every coin by rank, paged), /coins/{id}/market_chart
 * (interval=daily), /coins/{id}/market_chart/range (from, to in UNIX seconds; ./coingecko-answers.ts).
 * Control (outside /api/v3):
 *   POST /__control  {"mode": "none"|"5xx"|"429"|"429-no-retry-after"|"429-html"|"hang"|"reset"|
 *                     "truncated"|"wrong-shape"|"401"|"403", "paths"?: ["/coins/markets"], "times"?: n,
 *                     "retryAfterSeconds"?: n, "status"?: 5xx, "latency"?: {"/coins/markets": ms},
 *                     "now"?: ISO string | null, "resetStats"?: true, "extraCoins"?: n,
 *                     "publishDelayMinutes"?: n}
 *   GET  /__stats    {"total": n, "credits": n, "byPath": {"/coins/bitcoin/market_chart": n, ...}, "byQuery": {...},
 *                     "maxInFlight": n, "ranges": [{"path", "from", "to"}, ...],
 *                     "markets": [{"currency", "at", "urlChars"}, ...], "callers": {"byUserAgent": {...}, "traced": n}}
 * `credits`: the calls answered 200, what CoinGecko bills ("each successful request (HTTP 200) deducts 1
 * credit"); a refused or failed call costs none, though `total` counts it (the minute's limit does too).
 * A URL longer than `MAX_URL_CHARS` (about 8,100 characters, the whole URL as sent) gets 414 from the CDN
 * in front of the API, before anything else; a call without a User-Agent gets 403 with CoinGecko's body,
 * before anything else is looked at. Mode "403" refuses every call so (a build that sent none).
 * `byQuery` splits /coins/markets by form: "markets:ids", "markets:symbols", "markets:ranks" (neither).
 * `extraCoins`: that many more coins in /coins/list only (unranked, no market, chart 404): a flood of
 * real but dead tickers (fc0, fc1, ...).
 * A delay on any path: "latency". A failing auxiliary call: a mode with "paths".
 * `publishDelayMinutes` (default 0: a close is there at its midnight): a daily close published late. The
 * point at 00:00 UTC of day D is left out of /coins/{id}/market_chart and /market_chart/range (daily and
 * hourly) until D + n minutes of the emulator's clock; the real API publishes it at about D 00:35, and
 * sometimes later. The trailing "now" point (the current price) is unaffected.
 * Imported: `startCoinGeckoEmulator({ port?, requireKey?, now?, extraCoins?, publishDelayMinutes? })`.
 *
 * Runs on Node's type stripping: erasable TypeScript only, local imports with `.ts`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"
import { type CallersStats, makeCallers, userAgentOf } from "./callers.ts"
import { answer, marketsForm } from "./coingecko-answers.ts"
import { DAY_MS } from "./coingecko-data.ts"

export const faultModes = [
  "none",
  "5xx",
  "429",
  "429-no-retry-after",
  "429-html",
  "hang",
  "reset",
  "truncated",
  "wrong-shape",
  "401",
  "403"
] as const
export type FaultMode = (typeof faultModes)[number]

export interface FaultOptions {
  readonly mode: FaultMode
  /** Path prefixes (below /api/v3) the fault applies to; all paths when absent. */
  readonly paths?: ReadonlyArray<string>
  /** Apply to the next n matching calls only, then behave normally. */
  readonly times?: number
  /** Retry-After for mode "429" (default 7). */
  readonly retryAfterSeconds?: number
  /** Status for mode "5xx" (default 503). */
  readonly status?: number
}

export interface EmulatorStats {
  readonly total: number
  /** Calls answered 200: the credits CoinGecko bills for them. */
  readonly credits: number
  /** Calls per API path below /api/v3, faulted ones included. */
  readonly byPath: Readonly<Record<string, number>>
  /** /coins/markets calls per form: "markets:ids", "markets:symbols", "markets:ranks". */
  readonly byQuery: Readonly<Record<string, number>>
  /** Most API calls being answered at the same time. */
  readonly maxInFlight: number
  /** API calls being answered now. */
  readonly inFlight: number
  /** Every market_chart/range call since the last reset: its path and `from`, `to` (UNIX seconds). */
  readonly ranges: ReadonlyArray<{ readonly path: string; readonly from: number; readonly to: number }>
  /**
   * Every /coins/markets call since the last reset: its `vs_currency`, when, by the emulator's clock (epoch
   * ms), and the length of its whole URL as sent.
   */
  readonly markets: ReadonlyArray<{ readonly currency: string; readonly at: number; readonly urlChars: number }>
  /** Who called: User-Agents, and calls that carried trace headers (callers.ts). */
  readonly callers: CallersStats
}

export interface CoinGeckoEmulator {
  /** Base URL to use as COINGECKO_BASE_URL, e.g. http://127.0.0.1:40123/api/v3 */
  readonly url: string
  readonly port: number
  setFault(fault: FaultMode | FaultOptions): void
  /** Delay answers on paths starting with `pathPrefix` (below /api/v3); 0 removes it. */
  setLatency(pathPrefix: string, ms: number): void
  /** Freeze the emulator's clock (epoch ms), or undefined for the real clock. */
  setNow(epochMs: number | undefined): void
  /** Lists that many extra dead coins in /coins/list (see the header). */
  setExtraCoins(count: number): void
  /** Each day's 00:00 UTC close appears this many minutes after it (see the header); 0: at once. */
  setPublishDelay(minutes: number): void
  resetStats(): void
  stats(): EmulatorStats
  close(): Promise<void>
}

export interface EmulatorOptions {
  readonly port?: number
  readonly host?: string
  /** When set, requests must carry this key, else 401. */
  readonly requireKey?: string
  /** The header the key must come in (like the real demo and pro hosts); either header when absent. */
  readonly keyHeader?: "x-cg-demo-api-key" | "x-cg-pro-api-key"
  /** A fixed clock (epoch ms) for reproducible answers. */
  readonly now?: number
  /** Extra dead coins listed in /coins/list (see the header). */
  readonly extraCoins?: number
  /** Minutes after its 00:00 UTC that a daily close is published (see the header; default 0). */
  readonly publishDelayMinutes?: number
}

const API_PREFIX = "/api/v3"

/**
 * The longest URL CoinGecko's CDN takes, about 8,100 characters (the Talisman wallet measured it: its
 * MAX_COINGECKO_URL_LENGTH); past it, 414 with the CDN's page.
 */
export const MAX_URL_CHARS = 8_100
const URI_TOO_LARGE = `<html>
<head><title>414 Request-URI Too Large</title></head>
<body>
<center><h1>414 Request-URI Too Large</h1></center>
<hr><center>cloudflare</center>
</body>
</html>`

const CLOUDFLARE_429 = `<!DOCTYPE html>
<html><head><title>Error 1015 | Rate limited</title></head>
<body><div id="cf-error-details"><h1>Error 1015</h1><h2>You are being rate limited</h2>
<p>The owner of this website (api.coingecko.com) has banned you temporarily from accessing this website.</p>
<p>Cloudflare Ray ID: 8f00000000000000</p></div></body></html>`

/** CoinGecko's refusal of a call without a User-Agent (docs/upstreams.md §4). */
const NO_USER_AGENT =
  "Please add a descriptive User-Agent to your request. For higher rate limits & stable integration, please subscribe to our API plans: https://www.coingecko.com/en/api/pricing"

const sendJson = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

export const startCoinGeckoEmulator = (options: EmulatorOptions = {}): Promise<CoinGeckoEmulator> => {
  let fault: FaultOptions = { mode: "none" }
  let faultsLeft: number | undefined
  let frozenNow = options.now
  let extraCoins = options.extraCoins ?? 0
  let publishDelayMinutes = 0
  const latency = new Map<string, number>()
  let byPath: Record<string, number> = {}
  let byQuery: Record<string, number> = {}
  let ranges: Array<{ path: string; from: number; to: number }> = []
  let markets: Array<{ currency: string; at: number; urlChars: number }> = []
  let total = 0
  let credits = 0
  let inFlight = 0
  let maxInFlight = 0
  const callers = makeCallers()

  const setFault = (next: FaultMode | FaultOptions) => {
    const parsed = typeof next === "string" ? { mode: next } : next
    if (!faultModes.includes(parsed.mode)) throw new Error(`unknown fault mode ${String(parsed.mode)}`)
    fault = parsed
    faultsLeft = parsed.times
  }
  const resetStats = () => {
    byPath = {}
    byQuery = {}
    ranges = []
    markets = []
    total = 0
    credits = 0
    maxInFlight = inFlight
    callers.reset()
  }
  const stats = (): EmulatorStats => ({
    total,
    credits,
    byPath: { ...byPath },
    byQuery: { ...byQuery },
    maxInFlight,
    inFlight,
    ranges: [...ranges],
    markets: [...markets],
    callers: callers.stats()
  })
  const now = () => frozenNow ?? Date.now()

  /** The fault to apply to this call, consuming one of `times`. */
  const faultFor = (path: string): FaultOptions | undefined => {
    if (fault.mode === "none") return undefined
    if (fault.paths !== undefined && !fault.paths.some((prefix) => path.startsWith(prefix))) return undefined
    if (faultsLeft !== undefined) {
      if (faultsLeft <= 0) return undefined
      faultsLeft--
    }
    return fault
  }

  const keyAccepted = (req: IncomingMessage, query: URLSearchParams) => {
    if (options.requireKey === undefined) return true
    const given = options.keyHeader !== undefined
      ? req.headers[options.keyHeader]
      : req.headers["x-cg-demo-api-key"] ?? req.headers["x-cg-pro-api-key"] ?? query.get("x_cg_demo_api_key")
    return given === options.requireKey
  }

  const handleControl = async (req: IncomingMessage, res: ServerResponse, path: string) => {
    if (path === "/__stats" && req.method === "GET") return sendJson(res, 200, stats())
    if (path !== "/__control" || req.method !== "POST") return sendJson(res, 404, { error: "Not Found" })
    let body: Record<string, unknown>
    try {
      const chunks: Array<Buffer> = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>
    } catch {
      return sendJson(res, 400, { error: "control body must be JSON" })
    }
    try {
      if (body.mode !== undefined) setFault(body as unknown as FaultOptions)
      if (body.latency !== undefined) {
        for (const [prefix, ms] of Object.entries(body.latency as Record<string, number>)) setLatency(prefix, ms)
      }
      if (body.now !== undefined) frozenNow = body.now === null ? undefined : Date.parse(String(body.now))
      if (body.resetStats === true) resetStats()
      if (typeof body.extraCoins === "number") extraCoins = body.extraCoins
      if (body.publishDelayMinutes !== undefined) setPublishDelay(body.publishDelayMinutes as number)
    } catch (error) {
      return sendJson(res, 400, { error: String(error) })
    }
    return sendJson(res, 200, { fault, latency: Object.fromEntries(latency), now: new Date(now()).toISOString(), publishDelayMinutes })
  }

  const setPublishDelay = (minutes: number) => {
    if (typeof minutes !== "number" || !(minutes >= 0)) throw new Error(`publishDelayMinutes must be a number >= 0, not ${String(minutes)}`)
    publishDelayMinutes = minutes
  }
  setPublishDelay(options.publishDelayMinutes ?? 0)

  const setLatency = (prefix: string, ms: number) => {
    if (!(ms > 0)) latency.delete(prefix)
    else latency.set(prefix, ms)
  }

  /** Answers 200 are what CoinGecko bills: one credit each. */
  const answer200 = (res: ServerResponse, status: number, body: unknown) => {
    if (status === 200) credits++
    return sendJson(res, status, body)
  }

  const handleApi = async (req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams) => {
    total++
    byPath[path] = (byPath[path] ?? 0) + 1
    const urlChars = `http://${req.headers.host ?? ""}${req.url ?? ""}`.length
    if (path === "/coins/markets") {
      const form = marketsForm(query)
      byQuery[form] = (byQuery[form] ?? 0) + 1
      markets.push({ currency: query.get("vs_currency")?.toLowerCase() ?? "", at: now(), urlChars })
    }
    if (path.endsWith("/market_chart/range")) ranges.push({ path, from: Number(query.get("from")), to: Number(query.get("to")) })
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
    res.on("close", () => inFlight--)

    const delay = [...latency].find(([prefix]) => path.startsWith(prefix))?.[1]
    if (delay !== undefined) await new Promise((resolve) => setTimeout(resolve, delay))

    callers.note(req)
    // The CDN's limit, before the API sees the call.
    if (urlChars > MAX_URL_CHARS) {
      res.writeHead(414, { "content-type": "text/html" })
      return res.end(URI_TOO_LARGE)
    }
    if (req.method !== "GET") return sendJson(res, 405, { error: "Method Not Allowed" })
    // Since January 2026, on every plan and keyless alike, before the key is looked at.
    if (userAgentOf(req) === undefined) return sendJson(res, 403, { status: { error_code: 403, error_message: NO_USER_AGENT } })
    if (!keyAccepted(req, query)) {
      return sendJson(res, 401, { status: { error_code: 10002, error_message: "API Key Missing or invalid" } })
    }
    const active = faultFor(path)
    switch (active?.mode) {
      case "5xx":
        return sendJson(res, active.status ?? 503, { status: { error_code: active.status ?? 503, error_message: "Service Unavailable" } })
      case "429":
        return sendJson(res, 429, {
          status: { error_code: 429, error_message: "You've exceeded the Rate Limit. Please visit https://www.coingecko.com/en/api/pricing to subscribe to our API plans for higher rate limits." }
        }, { "retry-after": String(active.retryAfterSeconds ?? 7) })
      case "429-no-retry-after":
        return sendJson(res, 429, { status: { error_code: 429, error_message: "You've exceeded the Rate Limit." } })
      case "429-html":
        res.writeHead(429, { "content-type": "text/html; charset=UTF-8" })
        return res.end(CLOUDFLARE_429)
      case "hang":
        return // never answers; close() ends the connection
      case "reset":
        return req.socket.destroy()
      case "401":
        return sendJson(res, 401, { error: { status: { error_code: 10011, error_message: "Invalid API Key: the key is not valid for this host" } } })
      case "403":
        return sendJson(res, 403, { status: { error_code: 403, error_message: NO_USER_AGENT } })
      default:
        break
    }
    const { body, status } = answer(path, query, now(), extraCoins, publishDelayMinutes * 60_000)
    // A body cut short or of another shape was still answered 200: billed.
    if (active?.mode === "truncated" && status === 200) {
      credits++
      const text = JSON.stringify(body)
      res.writeHead(200, { "content-type": "application/json; charset=utf-8" })
      return res.end(text.slice(0, Math.max(1, Math.floor(text.length / 2))))
    }
    if (active?.mode === "wrong-shape" && status === 200) return answer200(res, 200, { result: { data: body } })
    return answer200(res, status, body)
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://emulator.invalid")
    const task = url.pathname.startsWith(`${API_PREFIX}/`)
      ? handleApi(req, res, url.pathname.slice(API_PREFIX.length), url.searchParams)
      : handleControl(req, res, url.pathname)
    task.catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: String(error) })
      else res.destroy()
    })
  })

  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      const address = server.address() as AddressInfo
      const host = address.family === "IPv6" ? `[${address.address}]` : address.address
      resolve({
        url: `http://${host}:${address.port}${API_PREFIX}`,
        port: address.port,
        setFault,
        setLatency,
        setNow: (epochMs) => {
          frozenNow = epochMs
        },
        setExtraCoins: (count) => {
          extraCoins = count
        },
        setPublishDelay,
        resetStats,
        stats,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done())
            // Hanging requests would keep close() waiting forever.
            server.closeAllConnections()
          })
      })
    })
  })
}

export { DAY_MS }

// Standalone: node test/emulators/coingecko.ts --port 4101 [--require-key KEY] [--now 2026-11-22T10:00:00Z] [--publish-delay-minutes 60]
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const argument = (name: string) => {
    const i = process.argv.indexOf(name)
    return i === -1 ? undefined : process.argv[i + 1]
  }
  const port = Number(argument("--port") ?? 4101)
  const requireKey = argument("--require-key")
  const nowArg = argument("--now")
  const delayArg = argument("--publish-delay-minutes")
  const emulator = await startCoinGeckoEmulator({
    port,
    ...(requireKey === undefined ? {} : { requireKey }),
    ...(nowArg === undefined ? {} : { now: Date.parse(nowArg) }),
    ...(delayArg === undefined ? {} : { publishDelayMinutes: Number(delayArg) })
  })
  // One JSON line, like the other emulators in this repo, so scripts can read the URL.
  const control = `${emulator.url.replace(/\/api\/v3$/, "")}/__control`
  process.stdout.write(`${JSON.stringify({ emulator: "coingecko", url: emulator.url, control })}\n`)
  const stop = () => void emulator.close().then(() => process.exit(0))
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
}
