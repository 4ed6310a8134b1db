/**
 * Coinbase Exchange's public market data as we use it (CONTRACT C4, "Second source"): four keyless GET
 * endpoints, each body validated (responses.ts), every misbehaviour a typed `SourceError`.
 *
 * Data calls (candles, ticker, stats) are guarded, outermost first: circuit breaker (its own key) →
 * overall time budget → retries (transient only, jittered) → per attempt: 429 cool-down → concurrency
 * permit → a token of the 10-a-second bucket (waited for, never a burst past it) → HTTP with a timeout.
 * The token is taken inside the permit so that calls released together by the permits cannot burst.
 * The product list gets one attempt and stays outside the breaker: its outage never refuses data calls.
 * Candles come with Coinbase's clock (its `Date` header): which days are closed is judged by it, not ours.
 * What these calls answer is held by the adapter (secondSource.ts, products.ts), not here.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { CircuitBreaker, RateLimiter, type Redis } from "effect/persistence"
import { startOfDay } from "../dailySeries.ts"
import { failWithFor, type SourceError } from "../upstream.ts"
import { layerGuardStoresMemory, layerGuardStoresRedis, makeSourceCaller, type RawResponse } from "../upstreamCall.ts"
import { coinbaseNow, DAILY_GRANULARITY_S, type DailyClose, dailyCloses, dayWindows } from "./candles.ts"
import { CoinbaseConfig } from "./CoinbaseConfig.ts"
import { type CoinbaseProduct, decodeCandles, decodeProducts, decodeStats, decodeTicker, errorMessage, type Stats, type Ticker } from "./responses.ts"

export type { CoinbaseProduct, Stats } from "./responses.ts"

/** How an answer credits Coinbase Exchange, whichever of its data it used. */
export const COINBASE_ATTRIBUTION = "Data provided by Coinbase Exchange"

export interface CoinbaseClientShape {
  /** The products Coinbase trades now: one attempt (the list is held by products.ts). */
  readonly products: Effect.Effect<ReadonlyArray<CoinbaseProduct>, SourceError>
  /**
   * Daily closes of a product from `fromDay` to `toDay` (epoch ms, 00:00 UTC, both included), oldest
   * first, one call per 300 days; days without trades are missing, today's (still moving) is there.
   * `asOf`: Coinbase's time when it answered (candles.ts `coinbaseNow`), which says which days are
   * closed. Unknown product: kind not-found.
   */
  readonly dailyCandles: (productId: string, fromDay: number, toDay: number) => Effect.Effect<{ readonly closes: ReadonlyArray<DailyClose>; readonly asOf: number }, SourceError>
  /** The last trade: its price and when it happened. */
  readonly ticker: (productId: string) => Effect.Effect<Ticker, SourceError>
  /** The 24-hour open and the last price (for the 24 h change). */
  readonly stats: (productId: string) => Effect.Effect<Stats, SourceError>
}

export class CoinbaseClient extends Context.Service<CoinbaseClient, CoinbaseClientShape>()("app/CoinbaseClient") {
  /** Requires the HTTP client, the config, a `RateLimiter` and a breaker store (memory, or Redis for several instances). */
  static readonly layerNoDeps: Layer.Layer<
    CoinbaseClient,
    never,
    HttpClient.HttpClient | CoinbaseConfig | RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore
  > = Layer.effect(CoinbaseClient, Effect.suspend(() => makeCoinbaseClient))

  /** One instance: rate bucket and breaker in memory. */
  static readonly layer: Layer.Layer<CoinbaseClient, never, HttpClient.HttpClient | CoinbaseConfig> = CoinbaseClient.layerNoDeps.pipe(
    Layer.provide(layerGuardStoresMemory)
  )

  /**
   * Several instances (REDIS_URL): the 10-a-second bucket and the breaker shared through Redis under
   * `keyPrefix`, so that instances behind one address stay within Coinbase's limit for it together.
   */
  static readonly layerRedis = (keyPrefix: string): Layer.Layer<CoinbaseClient, never, HttpClient.HttpClient | CoinbaseConfig | Redis.Redis> =>
    CoinbaseClient.layerNoDeps.pipe(Layer.provide(layerGuardStoresRedis(keyPrefix)))
}

const BUCKET_KEY = "coinbase:calls"
const fail = failWithFor("coinbase")

/** Coinbase's clock from its `Date` header (whole seconds), when it sent a readable one. */
const dateOf = (raw: RawResponse): ReadonlyArray<number> => {
  const at = Date.parse(raw.headers["date"] ?? "")
  return Number.isFinite(at) ? [at] : []
}

const makeCoinbaseClient = Effect.gen(function*() {
  const config = yield* CoinbaseConfig
  const http = yield* HttpClient.HttpClient
  const limiter = yield* RateLimiter.RateLimiter
  const breaker = yield* CircuitBreaker.make({
    tripPolicy: CircuitBreaker.consecutive(config.breakerFailures),
    openDuration: Duration.millis(config.breakerOpenMs)
  })
  // Coinbase sends no Retry-After; its window is a second.
  const reading = { source: "coinbase" as const, errorMessage, keyed: false, rateLimitedSeconds: () => config.rateLimitedCoolDownSeconds }

  /** Waits for a token of the bucket; a store that fails (Redis) is not a reason to refuse the call. */
  const token = RateLimiter.sleep(limiter, {
    key: BUCKET_KEY,
    algorithm: "token-bucket",
    window: Duration.seconds(1),
    limit: config.callsPerSecond
  }).pipe(
    Effect.asVoid,
    Effect.catchTag("RateLimiterError", (error) => Effect.logWarning("rates: Coinbase rate bucket unavailable; calling without it", error.reason.message))
  )

  const requestFor = (path: string, params: Record<string, string>) =>
    HttpClientRequest.get(`${config.baseUrl}${path}`).pipe(HttpClientRequest.setUrlParams(params), HttpClientRequest.acceptJson)

  const caller = yield* makeSourceCaller({
    http,
    reading,
    guard: config,
    breaker,
    maxConcurrency: config.maxConcurrency,
    coolDownDetail: "Coinbase asked us to slow down (cooling down after 429)",
    beforeSend: token
  })

  /** Candles, and Coinbase's clock when it sent them. */
  const candlesAndDate = (what: string) => {
    const candles = caller.body(what, decodeCandles)
    return (raw: RawResponse) => Effect.map(candles(raw), (read) => ({ candles: read, dates: dateOf(raw) }))
  }

  const dataCall = <A>(what: string, path: string, params: Record<string, string>, read: (raw: RawResponse) => Effect.Effect<A, SourceError>): Effect.Effect<A, SourceError> =>
    Effect.suspend(() => caller.call(what, requestFor(path, params), read)).pipe(Effect.withSpan("coinbase.call", { attributes: { what } }))

  const productPath = (productId: string) => `/products/${encodeURIComponent(productId)}`

  const dailyCandles = (productId: string, fromDay: number, toDay: number) =>
    Effect.gen(function*() {
      const windows = dayWindows(startOfDay(fromDay), startOfDay(toDay))
      const what = `daily candles of ${productId}`
      const parts = yield* Effect.forEach(windows, ([start, end]) =>
        dataCall(what, `${productPath(productId)}/candles`, {
          granularity: String(DAILY_GRANULARITY_S),
          start: new Date(start).toISOString(),
          end: new Date(end).toISOString()
        }, candlesAndDate(what)), { concurrency: "unbounded" })
      const candles = parts.flatMap((part) => part.candles)
      const { closes, offMidnight } = dailyCloses(candles, startOfDay(fromDay), startOfDay(toDay))
      if (offMidnight !== undefined) {
        return yield* fail("invalid-response", `${what}: a candle at ${new Date(offMidnight).toISOString()}, not 00:00 UTC`)
      }
      return { closes, asOf: coinbaseNow(parts.flatMap((part) => part.dates), candles) }
    })

  return CoinbaseClient.of({
    // Large (hundreds of products): more time for its one attempt.
    products: caller.attempt("product list", requestFor("/products", {}), caller.body("product list", decodeProducts), config.attemptTimeoutMs * 3).pipe(
      Effect.withSpan("coinbase.call", { attributes: { what: "product list" } })
    ),
    dailyCandles,
    ticker: (productId) => {
      const what = `ticker of ${productId}`
      return dataCall(what, `${productPath(productId)}/ticker`, {}, caller.body(what, decodeTicker))
    },
    stats: (productId) => {
      const what = `24 h stats of ${productId}`
      return dataCall(what, `${productPath(productId)}/stats`, {}, caller.body(what, decodeStats))
    }
  })
})
