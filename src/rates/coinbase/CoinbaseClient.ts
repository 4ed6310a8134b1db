/**
 * Coinbase Exchange's public market data as we use it (CONTRACT C4, "Second source"): four keyless GET
 * endpoints, each body validated (responses.ts), every misbehaviour a typed `SourceError`.
 * Data calls are guarded as in upstreamCall.ts; each attempt waits, inside its permit (so calls released
 * together cannot burst), for a token of the 10-a-second bucket. The product list gets one attempt, outside
 * the breaker. Candles come with Coinbase's clock (`Date` header), which judges which days are closed.
 * What these calls answer is held by secondSource.ts and products.ts.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { CircuitBreaker, RateLimiter } from "effect/persistence"
import { startOfDay } from "../dailySeries.ts"
import { failWithFor, type SourceError } from "../upstream.ts"
import { layerGuardStoresMemory, makeSourceCaller, type RawResponse } from "../upstreamCall.ts"
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
   * Daily closes from `fromDay` to `toDay` (epoch ms, 00:00 UTC, both included), oldest first, one call per
   * 300 days; days without trades missing, today's included. `asOf`: Coinbase's time when it answered
   * (candles.ts `coinbaseNow`). Unknown product: not-found.
   */
  readonly dailyCandles: (productId: string, fromDay: number, toDay: number) => Effect.Effect<{ readonly closes: ReadonlyArray<DailyClose>; readonly asOf: number }, SourceError>
  /** The last trade: its price and when it happened. */
  readonly ticker: (productId: string) => Effect.Effect<Ticker, SourceError>
  /** The 24-hour open and the last price (for the 24 h change). */
  readonly stats: (productId: string) => Effect.Effect<Stats, SourceError>
}

export class CoinbaseClient extends Context.Service<CoinbaseClient, CoinbaseClientShape>()("app/CoinbaseClient") {
  /** Requires the HTTP client, the config, a `RateLimiter` and a breaker store (memory, or Redis for several instances: layer.ts, redisDown.ts). */
  static readonly layerNoDeps: Layer.Layer<
    CoinbaseClient,
    never,
    HttpClient.HttpClient | CoinbaseConfig | RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore
  > = Layer.effect(CoinbaseClient, Effect.suspend(() => makeCoinbaseClient))

  /** One instance: rate bucket and breaker in memory. */
  static readonly layer: Layer.Layer<CoinbaseClient, never, HttpClient.HttpClient | CoinbaseConfig> = CoinbaseClient.layerNoDeps.pipe(
    Layer.provide(layerGuardStoresMemory)
  )
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
  // Coinbase sends no Retry-After; its window is a second.
  const reading = { source: "coinbase" as const, errorMessage, keyed: false, rateLimitedSeconds: () => config.rateLimitedCoolDownSeconds }

  /** Waits for a token of the bucket (while Redis fails, of this process's share: redisDown.ts), which never refuses. */
  const token = RateLimiter.sleep(limiter, { key: BUCKET_KEY, algorithm: "token-bucket", window: Duration.seconds(1), limit: config.callsPerSecond }).pipe(
    Effect.asVoid,
    Effect.orDie
  )

  const requestFor = (path: string, params: Record<string, string>) =>
    HttpClientRequest.get(`${config.baseUrl}${path}`).pipe(HttpClientRequest.setUrlParams(params), HttpClientRequest.acceptJson)

  const caller = yield* makeSourceCaller({ http, reading, config, coolDownDetail: "Coinbase asked us to slow down (cooling down after 429)", beforeSend: token })

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
        return yield* fail("InvalidResponse", `${what}: a candle at ${new Date(offMidnight).toISOString()}, not 00:00 UTC`)
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
