/**
 * Issue 28's live quotes end to end (rates-live-*.test.ts): the service as `npm start` runs it (spawned,
 * test/support/spawn.ts) against the CoinGecko and Coinbase emulators on the real clock, the landing
 * page's three queries (test/support/simulatedMonth.ts) asked about 10 times a second from 200
 * addresses (X-Forwarded-For, TRUST_PROXY=true), and what each answer says of its BTC, ETH and SOL prices.
 */
import { expect } from "vitest"
import { type CoinbaseEmulator, type CoinbaseEmulatorOptions, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { type CoinGeckoEmulator, type EmulatorOptions, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { startRedisOnFreePort } from "../../support/redis.ts"
import { LANDING_PAGE } from "../../support/simulatedMonth.ts"
import { freePort, type ServiceProcess, spawnService, tempDataDir } from "../../support/spawn.ts"

const ADDRESSES = 200
const PER_SECOND = 10
/** The coins the feed prices on the landing page (the curated majors it asks for). */
const LIVE_SYMBOLS = new Set(["BTC", "ETH", "SOL"])

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface LiveRate {
  readonly symbol: string
  /** Coinbase's product: the symbol in the answer's currency. */
  readonly product: string
  readonly price: number
  readonly priceSource: string
  /** When the answer was received less the rate's asOf (whole seconds, so up to 1 s more than the truth). */
  readonly ageMs: number
}

export interface LiveAnswer {
  readonly instance: number
  readonly status: number
  /** Date.now() once the body was read. */
  readonly at: number
  /** The rates of BTC, ETH and SOL only. */
  readonly rates: ReadonlyArray<LiveRate>
  /** The body of an answer other than 200, for the failure message. */
  readonly problem?: string
}

export interface LiveRig {
  readonly coingecko: CoinGeckoEmulator
  readonly coinbase: CoinbaseEmulator
  readonly services: ReadonlyArray<ServiceProcess>
  /** Each service's METRICS_PORT (with `metrics`). */
  readonly metricsPorts: ReadonlyArray<number>
  readonly close: () => Promise<void>
}

/**
 * The emulators on the real clock and `instances` services on the shipped defaults, their upstreams
 * pointed at the emulators, each of `workers` processes; with `redis`, a private redis-server they all
 * share (the Coinbase bucket, the REST tickers' copies and the feed's lease go through it).
 */
export const startLiveRig = async (options: {
  readonly instances: number
  readonly redis: boolean
  readonly metrics?: boolean
  /** Server processes per instance (WEB_CONCURRENCY; needs `redis`); 1 by default. */
  readonly workers?: number
  /** The emulators' options (the feed's cadence, a frozen clock …), and more variables for every instance. */
  readonly coinbase?: CoinbaseEmulatorOptions
  readonly coingecko?: EmulatorOptions
  readonly env?: Readonly<Record<string, string>>
}): Promise<LiveRig> => {
  const coingecko = await startCoinGeckoEmulator({ host: "127.0.0.1", ...options.coingecko })
  const coinbase = await startCoinbaseEmulator({ host: "127.0.0.1", ...options.coinbase })
  const started = options.redis ? await startRedisOnFreePort() : undefined
  const redisPort = started?.port
  const redis = started?.child
  const services: Array<ServiceProcess> = []
  const metricsPorts: Array<number> = []
  const close = async () => {
    await Promise.all(services.map((s) => s.stop("SIGKILL")))
    redis?.kill("SIGKILL")
    await coinbase.close()
    await coingecko.close()
  }
  try {
    for (let i = 0; i < options.instances; i++) {
      if (options.metrics === true) metricsPorts.push(await freePort())
      services.push(await spawnService({
        COINGECKO_BASE_URL: coingecko.url,
        COINBASE_BASE_URL: coinbase.url,
        COINBASE_WS_URL: coinbase.wsUrl,
        DATA_DIR: tempDataDir(),
        TRUST_PROXY: "true",
        RATE_LIMIT_RATES_PER_MIN: "1000000",
        ...(redisPort === undefined ? {} : { REDIS_URL: `redis://127.0.0.1:${redisPort}` }),
        ...(options.workers === undefined ? {} : { WEB_CONCURRENCY: String(options.workers) }),
        ...(options.metrics === true ? { METRICS_PORT: String(metricsPorts[i]) } : {}),
        ...options.env
      }, 30_000))
    }
  } catch (error) {
    await close()
    throw error
  }
  return { coingecko, coinbase, services, metricsPorts, close }
}

/** The `i`-th request of the landing page's traffic: its query in turn, one of 200 addresses, one of the instances in turn. */
const askLanding = async (services: ReadonlyArray<ServiceProcess>, i: number): Promise<LiveAnswer> => {
  const instance = i % services.length
  const query = LANDING_PAGE[i % LANDING_PAGE.length]!
  const currency = ("currency" in query ? query.currency : "usd").toUpperCase()
  try {
    const response = await fetch(`${services[instance]!.url}/api/v1/exchange-rates`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": `198.51.100.${i % ADDRESSES}` },
      body: JSON.stringify(query),
      signal: AbortSignal.timeout(15_000)
    })
    const text = await response.text()
    const at = Date.now()
    if (response.status !== 200) return { instance, status: response.status, at, rates: [], problem: text.slice(0, 300) }
    const body = JSON.parse(text) as { rates: Array<{ symbol: string; price: number; asOf?: string; sources?: { price: string } }> }
    const rates = body.rates.filter((rate) => LIVE_SYMBOLS.has(rate.symbol)).map((rate) => ({
      symbol: rate.symbol,
      product: `${rate.symbol}-${currency}`,
      price: rate.price,
      // Before live quotes a rate had no `sources`: "(none)" says so in the failure.
      priceSource: rate.sources?.price ?? "(none)",
      ageMs: at - Date.parse(rate.asOf ?? "")
    }))
    return { instance, status: 200, at, rates }
  } catch (error) {
    return { instance, status: 0, at: Date.now(), rates: [], problem: String(error) }
  }
}

/**
 * The landing page's traffic until `stop()` says so, PER_SECOND requests a second by the clock: a wake-up that came late
 * (a starved test process) sends every request due by then, so the traffic is as much as asked; resolves with every answer.
 */
export const drive = async (services: ReadonlyArray<ServiceProcess>, stop: () => boolean, first = 0): Promise<Array<LiveAnswer>> => {
  const pending: Array<Promise<LiveAnswer>> = []
  const started = Date.now()
  for (let i = first; !stop();) {
    const due = first + Math.floor(((Date.now() - started) * PER_SECOND) / 1000) + 1
    for (; i < due; i++) pending.push(askLanding(services, i))
    await sleep(1000 / PER_SECOND)
  }
  return Promise.all(pending)
}

/** Until every instance answers every landing query 200 with its BTC price from Coinbase, and `ready()` holds. */
export const warmUp = async (services: ReadonlyArray<ServiceProcess>, ready: () => boolean | Promise<boolean>, timeoutMs = 30_000) => {
  const started = Date.now()
  let last: ReadonlyArray<LiveAnswer> = []
  while (Date.now() - started < timeoutMs) {
    last = await Promise.all(services.flatMap((_, s) => LANDING_PAGE.map((_, q) => askLanding(services, s + services.length * q))))
    if ((await ready()) && last.every((a) => a.status === 200 && a.rates.some((r) => r.symbol === "BTC" && r.priceSource === "coinbase"))) {
      return (Date.now() - started) / 1000
    }
    await sleep(500)
  }
  throw new Error(`not warm after ${timeoutMs} ms: ${JSON.stringify(last)}\n${services.map((s) => s.output().slice(-2_000)).join("\n---\n")}`)
}

/** Every answer 200, its BTC, ETH and SOL priced by Coinbase, none older than `maxAgeMs` (plus asOf's truncation). */
export const expectLive = (answers: ReadonlyArray<LiveAnswer>, maxAgeMs: number) => {
  const bad = answers.filter((a) => a.status !== 200)
  expect(bad.length, `answers other than 200: ${JSON.stringify(bad.slice(0, 5))}`).toBe(0)
  for (const answer of answers) {
    expect(answer.rates.length).toBeGreaterThan(0)
    for (const rate of answer.rates) {
      expect(rate.priceSource, `${rate.product} at ${new Date(answer.at).toISOString()}`).toBe("coinbase")
      expect(rate.ageMs, `${rate.product}'s age at ${new Date(answer.at).toISOString()}`).toBeLessThanOrEqual(maxAgeMs + 1_000)
    }
  }
}

/** How many answers had each status. */
export const statuses = (answers: ReadonlyArray<LiveAnswer>) => {
  const count: Record<number, number> = {}
  for (const answer of answers) count[answer.status] = (count[answer.status] ?? 0) + 1
  return JSON.stringify(count)
}

export const worstAge = (answers: ReadonlyArray<LiveAnswer>) => Math.max(0, ...answers.flatMap((a) => a.rates.map((r) => r.ageMs)))

/**
 * Coinbase REST calls (every path), sampled every `everyMs`: the most in any second, and the 429s.
 * "10 a second" is a token bucket, as Coinbase's own limit and the client's (CoinbaseClient.ts: 10
 * tokens, one back every 100 ms): `overBucket` is the most calls of any interval beyond what such a
 * bucket lets through in it (10 + 10 a second); two instances with a bucket each would show up to 10.
 */
export const sampleCoinbase = (coinbase: CoinbaseEmulator, everyMs = 100) => {
  const samples: Array<{ at: number; total: number; tickers: number; limited: number }> = []
  const take = () => {
    const stats = coinbase.stats()
    const tickers = Object.entries(stats.byPath).filter(([path]) => /\/(ticker|stats)$/.test(path)).reduce((n, [, c]) => n + c, 0)
    samples.push({ at: Date.now(), total: Object.values(stats.byPath).reduce((n, c) => n + c, 0), tickers, limited: stats.byStatus["429"] ?? 0 })
  }
  take()
  const timer = setInterval(take, everyMs)
  const within = (from: number, to: number) => samples.filter((s) => s.at >= from && s.at <= to)
  return {
    /** The most calls between two samples at most a second apart. */
    maxPerSecond: (from = 0, to = Number.POSITIVE_INFINITY) => {
      const list = within(from, to)
      let most = 0
      for (let i = 0, j = 0; i < list.length; i++) {
        while (j + 1 < list.length && list[j + 1]!.at - list[i]!.at <= 1_000) j++
        most = Math.max(most, list[j]!.total - list[i]!.total)
      }
      return most
    },
    overBucket: (from = 0, to = Number.POSITIVE_INFINITY) => {
      const list = within(from, to)
      let most = Number.NEGATIVE_INFINITY
      for (let i = 0; i < list.length; i++) {
        for (let j = i + 1; j < list.length; j++) {
          most = Math.max(most, list[j]!.total - list[i]!.total - (10 + Math.floor((list[j]!.at - list[i]!.at) / 100)))
        }
      }
      return Math.max(0, most)
    },
    /** The last sample taken at or before `at`. */
    at: (at: number) => samples.findLast((s) => s.at <= at) ?? samples[0]!,
    last: () => samples.at(-1)!,
    take,
    stop: () => clearInterval(timer)
  }
}

/**
 * Whether a spawned service (it needs METRICS_PORT) reads the feed: it holds the connection (its
 * `rates_live_feed_connected` gauge is 1), or reads the holder's quotes (issue 32: one connection per
 * deployment sharing a Redis), and has live pairs (`rates_live_pairs{state="live"}`, sampled every 5 s): its
 * prices come from the feed, not the REST tickers that serve until a first whole tick is read.
 */
export const feedConnected = async (metricsPort: number): Promise<boolean> => {
  const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => "")
  const gauge = (pattern: string) => Number(new RegExp(`^${pattern} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN)
  const holds = gauge("rates_live_feed_holder(?:\\{[^}]*\\})?") === 1
  const live = gauge(`rates_live_pairs\\{state="live"\\}`) > 0
  return live && (holds ? gauge("rates_live_feed_connected(?:\\{[^}]*\\})?") === 1 : gauge("rates_live_feed_holder(?:\\{[^}]*\\})?") === 0)
}
