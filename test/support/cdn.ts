/**
 * GET /api/v1/rates behind a caching proxy, as the CDN test (test/integration/e2e/rates-cdn.test.ts) and
 * `npm run bench -- --cdn` run it: the service as `npm start` runs it (spawned) over the CoinGecko and Coinbase
 * emulators on the real clock, TRUST_PROXY naming the proxy, optionally a private nginx in front
 * (test/support/nginx.ts); visitors from addresses of their own (sockets bound to 127.0.x.y) asking the landing
 * page's three queries; the origin's requests counted by its own metrics (METRICS_PORT).
 */
import { Agent, request } from "node:http"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../emulators/coinbase.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../emulators/coingecko.ts"
import { type CachingProxy, startCachingProxy } from "./nginx.ts"
import { LANDING_PAGE } from "./simulatedMonth.ts"
import { freePort, type ServiceProcess, spawnService, tempDataDir } from "./spawn.ts"

/** The landing page's three queries as the page asks them: one spelling each. */
export const LANDING_QUERIES: ReadonlyArray<string> = LANDING_PAGE.map((q) =>
  `cryptos=${q.cryptos.join(",")}${"currency" in q ? `&currency=${q.currency}` : ""}&days=${q.days}`)

/** The `i`-th visitor address of `count`, none of them the proxy's 127.0.0.1: 127.0.1.0, 127.0.1.1, … */
export const visitorAddress = (i: number, count: number, block = 1) => {
  const n = i % count
  return `127.0.${block + Math.floor(n / 250)}.${n % 250}`
}

export interface Visit {
  readonly status: number
  /** Date.now() once the body was read. */
  readonly at: number
  /** nginx's X-Cache-Status (HIT, MISS, STALE, UPDATING, EXPIRED, REVALIDATED), undefined without the proxy. */
  readonly cacheStatus: string | undefined
  readonly maxAge: number | undefined
  readonly staleWhileRevalidate: number | undefined
  readonly staleIfError: number | undefined
  /** The response's Date (the origin's, whole seconds), epoch ms. */
  readonly date: number
  /** The oldest price's `asOf` of a 200 (the answer's `asOf`), epoch ms. */
  readonly asOf: number | undefined
  /** A 200's body, or the start of any other. */
  readonly body: string
}

const directive = (field: string | undefined, name: string) => {
  const match = new RegExp(`(?:^|,)\\s*${name}=(\\d+)`).exec(field ?? "")
  return match === null ? undefined : Number(match[1])
}

/** One visitor's browser: keep-alive connections from its own address. */
const agents = new Map<string, Agent>()
const agentFor = (address: string) => {
  let agent = agents.get(address)
  if (agent === undefined) agents.set(address, agent = new Agent({ keepAlive: true, maxSockets: 4, localAddress: address }))
  return agent
}
/** Closes every visitor's connections. */
export const closeVisitors = () => {
  for (const agent of agents.values()) agent.destroy()
  agents.clear()
}

/** GET `baseUrl` + /api/v1/rates?`query` from `address`. */
export const visit = (baseUrl: string, query: string, address: string, timeoutMs = 15_000): Promise<Visit> =>
  new Promise((resolve) => {
    const req = request(`${baseUrl}/api/v1/rates?${query}`, { agent: agentFor(address), timeout: timeoutMs }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8")
        const cacheControl = res.headers["cache-control"]
        let asOf: number | undefined
        if (res.statusCode === 200) asOf = Date.parse((JSON.parse(body) as { asOf: string }).asOf)
        resolve({
          status: res.statusCode!,
          at: Date.now(),
          cacheStatus: res.headers["x-cache-status"] as string | undefined,
          maxAge: directive(cacheControl, "max-age"),
          staleWhileRevalidate: directive(cacheControl, "stale-while-revalidate"),
          staleIfError: directive(cacheControl, "stale-if-error"),
          date: Date.parse(res.headers.date ?? ""),
          asOf,
          body: res.statusCode === 200 ? body : body.slice(0, 300)
        })
      })
    })
    req.on("timeout", () => req.destroy(new Error("timed out")))
    req.on("error", (error) =>
      resolve({ status: 0, at: Date.now(), cacheStatus: undefined, maxAge: undefined, staleWhileRevalidate: undefined, staleIfError: undefined, date: Number.NaN, asOf: undefined, body: String(error) }))
    req.end()
  })

/**
 * `total` visits over `durationMs`, paced by the clock (a late wake-up sends every visit due by then), the
 * landing page's queries in turn from `addresses` addresses; resolves with every visit.
 */
export const driveVisits = async (baseUrl: string, options: { readonly total: number; readonly durationMs: number; readonly addresses: number }) => {
  const pending: Array<Promise<Visit>> = []
  const started = Date.now()
  for (let i = 0; i < options.total;) {
    const due = Math.min(options.total, Math.floor(((Date.now() - started) * options.total) / options.durationMs) + 1)
    for (; i < due; i++) pending.push(visit(baseUrl, LANDING_QUERIES[i % LANDING_QUERIES.length]!, visitorAddress(i, options.addresses)))
    await new Promise((r) => setTimeout(r, 5))
  }
  return Promise.all(pending)
}

/** The seconds between receiving a 200 and its oldest price's observation. */
export const priceAgeSeconds = (v: Visit) => (v.at - v.asOf!) / 1000

export interface CdnRig {
  readonly coingecko: CoinGeckoEmulator
  readonly coinbase: CoinbaseEmulator
  readonly origin: ServiceProcess
  readonly metricsPort: number
  /** nginx in front, when asked for. */
  readonly proxy: CachingProxy | undefined
  /** Where visitors go: the proxy, or the origin itself. */
  readonly url: string
  /** Requests the origin answered on GET /api/v1/rates so far, every status (its http_requests_total). */
  readonly originRequests: () => Promise<number>
  readonly close: () => Promise<void>
}

/** The origin's http_requests_total of a route, summed over methods and statuses. */
export const requestsServed = async (metricsPort: number, route = "/api/v1/rates") => {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
  let total = 0
  for (const line of text.split("\n")) {
    if (line.startsWith("http_requests_total{") && line.includes(`route="${route}"`)) total += Number(line.slice(line.lastIndexOf(" ") + 1))
  }
  return total
}

/** Starts the service over the emulators as `npm start` runs it; with `cache`, nginx in front. */
export const startCdnRig = async (options: { readonly cache: boolean; readonly env?: Record<string, string> }): Promise<CdnRig> => {
  const coingecko = await startCoinGeckoEmulator({ host: "127.0.0.1" })
  const coinbase = await startCoinbaseEmulator({ host: "127.0.0.1" })
  let origin: ServiceProcess | undefined
  let proxy: CachingProxy | undefined
  const close = async () => {
    closeVisitors()
    await proxy?.stop()
    await origin?.stop("SIGKILL")
    await coinbase.close()
    await coingecko.close()
  }
  try {
    const metricsPort = await freePort()
    origin = await spawnService({
      COINGECKO_BASE_URL: coingecko.url,
      COINBASE_BASE_URL: coinbase.url,
      COINBASE_WS_URL: coinbase.wsUrl,
      DATA_DIR: tempDataDir(),
      // The proxy's address: visitors are counted by the address it appends to X-Forwarded-For.
      TRUST_PROXY: "127.0.0.1/32",
      METRICS_PORT: String(metricsPort),
      ...options.env
    }, 30_000)
    if (options.cache) proxy = await startCachingProxy(`127.0.0.1:${origin.port}`)
    return {
      coingecko,
      coinbase,
      origin,
      metricsPort,
      proxy,
      url: proxy?.url ?? origin.url,
      originRequests: () => requestsServed(metricsPort),
      close
    }
  } catch (error) {
    await close()
    throw error
  }
}

/** Until every landing query answers 200 with its BTC price from Coinbase's feed (the service warm), through `url`. */
export const warmUpLanding = async (url: string, timeoutMs = 90_000) => {
  const started = Date.now()
  let last: ReadonlyArray<Visit> = []
  while (Date.now() - started < timeoutMs) {
    last = await Promise.all(LANDING_QUERIES.map((q, i) => visit(url, q, visitorAddress(i, 3, 200))))
    const live = (v: Visit) =>
      (JSON.parse(v.body) as { rates: Array<{ symbol: string; sources: { price: string } }> }).rates.some((r) => r.symbol === "BTC" && r.sources.price === "coinbase")
    if (last.every((v) => v.status === 200 && live(v))) return
    await new Promise((r) => setTimeout(r, 500))
  }
  throw new Error(`not warm after ${timeoutMs} ms: ${JSON.stringify(last.map((v) => [v.status, v.body.slice(0, 200)]))}`)
}
