/**
 * Coinbase Exchange's public market data as we use it (CONTRACT C4, "Second source"): four keyless GET
 * endpoints, each body validated (coinbaseResponses.ts), every misbehaviour a typed `CoinbaseError`.
 *
 * Data calls (candles, ticker, stats) are guarded, outermost first:
 *   single flight (identical concurrent calls share one) → circuit breaker (its own key) → overall time
 *   budget → retries (transient only, jittered) → per attempt: 429 cool-down → concurrency permit →
 *   a token of the 10-a-second bucket (waited for, never a burst past it) → HTTP with a timeout.
 * The token is taken inside the permit so that calls released together by the permits cannot burst.
 *
 * The product list is held by productIndex.ts, loaded in the background: its call gets one attempt,
 * stays outside the breaker, and its outage never refuses data calls.
 */
import { Clock, Context, Duration, Effect, Layer, Schedule, Semaphore } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { CircuitBreaker, RateLimiter, type Redis } from "effect/persistence"
import { recordUpstreamCall } from "../../observability/metrics.ts"
import { makeSingleFlight } from "../SingleFlight.ts"
import { DAILY_GRANULARITY_S, type DailyClose, dailyCloses, dayWindows, startOfUtcDay } from "./candles.ts"
import { CoinbaseConfig } from "./CoinbaseConfig.ts"
import {
  type Candle,
  CoinbaseError,
  type CoinbaseProduct,
  decodeCandles,
  type Decoder,
  decodeProducts,
  decodeStats,
  decodeTicker,
  failWith,
  interpretResponse,
  type RawResponse,
  type Stats,
  type Ticker
} from "./coinbaseResponses.ts"
import { makeProductIndex } from "./productIndex.ts"
import { breakerOutcome } from "../upstreamFailure.ts"
import { layerUpstreamGuardsRedis } from "../upstreamGuards.ts"

export { type CoinbaseFailureKind, CoinbaseError, type CoinbaseProduct, type Stats, type Ticker, toRatesError } from "./coinbaseResponses.ts"
export { change24h, type DailyClose } from "./candles.ts"

export interface CoinbaseClientShape {
  /** The products Coinbase trades now (held in memory, reloaded in the background). */
  readonly products: Effect.Effect<ReadonlyArray<CoinbaseProduct>, CoinbaseError>
  /** The product quoting `base` in `quote` (case-insensitive: "btc", "eur"), or undefined when not listed. */
  readonly productFor: (base: string, quote: string) => Effect.Effect<CoinbaseProduct | undefined, CoinbaseError>
  /**
   * Daily closes of a product from `fromDay` to `toDay` (epoch ms, 00:00 UTC, both included), oldest
   * first, one call per 300 days; days without trades are missing. Unknown product: kind not-found.
   */
  readonly dailyCandles: (productId: string, fromDay: number, toDay: number) => Effect.Effect<ReadonlyArray<DailyClose>, CoinbaseError>
  /** The last trade: its price and when it happened. */
  readonly ticker: (productId: string) => Effect.Effect<Ticker, CoinbaseError>
  /** The 24-hour open and the last price (for the 24 h change). */
  readonly stats: (productId: string) => Effect.Effect<Stats, CoinbaseError>
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
    Layer.provide(Layer.mergeAll(
      RateLimiter.layer.pipe(Layer.provide(RateLimiter.layerStoreMemory)),
      CircuitBreaker.layerStoreMemory()
    ))
  )

  /**
   * Several instances (REDIS_URL): the 10-a-second bucket and the breaker shared through Redis under
   * `keyPrefix`, so that instances behind one address stay within Coinbase's limit for it together.
   */
  static readonly layerRedis = (keyPrefix: string): Layer.Layer<CoinbaseClient, never, HttpClient.HttpClient | CoinbaseConfig | Redis.Redis> =>
    CoinbaseClient.layerNoDeps.pipe(Layer.provide(layerUpstreamGuardsRedis(keyPrefix)))
}

const BREAKER_KEY = "coinbase"
const BUCKET_KEY = "coinbase:calls"
const PROBE_POLL_MS = 25

const makeCoinbaseClient = Effect.gen(function*() {
  const config = yield* CoinbaseConfig
  const http = yield* HttpClient.HttpClient
  const limiter = yield* RateLimiter.RateLimiter
  const breaker = yield* CircuitBreaker.make({
    tripPolicy: CircuitBreaker.consecutive(config.breakerFailures),
    openDuration: Duration.millis(config.breakerOpenMs)
  })
  const permits = yield* Semaphore.make(config.maxConcurrency)
  const flights = yield* makeSingleFlight
  // After a 429 nobody calls until the cool-down has passed: hammering it only extends the ban.
  let coolDownUntil = 0

  const checkCoolDown = Effect.flatMap(Clock.currentTimeMillis, (now) =>
    now < coolDownUntil
      ? failWith("rate-limited", "Coinbase asked us to slow down (cooling down after 429)", Math.ceil((coolDownUntil - now) / 1000))
      : Effect.void)

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

  /** One HTTP exchange, read; a 429 starts the cool-down. */
  const send = <A>(what: string, request: HttpClientRequest.HttpClientRequest, decode: Decoder<A>, timeoutMs: number) =>
    Effect.gen(function*() {
      const response = yield* http.execute(request)
      const body = yield* response.text
      recordUpstreamCall("coinbase", String(response.status))
      return { status: response.status, body }
    }).pipe(
      Effect.tapError(() => Effect.sync(() => recordUpstreamCall("coinbase", "failed"))),
      Effect.catchTag("HttpClientError", (error) =>
        failWith("transient", `${what}: ${error.reason._tag}${"description" in error.reason && error.reason.description ? `: ${error.reason.description}` : ""}`)),
      Effect.timeoutOrElse({
        duration: Duration.millis(timeoutMs),
        orElse: () => failWith("transient", `${what}: no answer within ${timeoutMs} ms`)
      }),
      Effect.flatMap((raw: RawResponse) =>
        interpretResponse(what, raw, decode, config.rateLimitedCoolDownSeconds).pipe(
          Effect.tapError((error) =>
            error.kind === "rate-limited"
              ? Effect.flatMap(Clock.currentTimeMillis, (now) =>
                Effect.sync(() => {
                  coolDownUntil = Math.max(coolDownUntil, now + error.retryAfterSeconds * 1000)
                }))
              : Effect.void
          )
        ))
    )

  const attempt = <A>(what: string, request: HttpClientRequest.HttpClientRequest, decode: Decoder<A>, timeoutMs: number) =>
    checkCoolDown.pipe(Effect.andThen(permits.withPermit(Effect.andThen(token, send(what, request, decode, timeoutMs)))))

  const requestFor = (path: string, params: Record<string, string>) =>
    HttpClientRequest.get(`${config.baseUrl}${path}`).pipe(HttpClientRequest.setUrlParams(params), HttpClientRequest.acceptJson)

  // Jitter keeps instances that failed together from retrying in lockstep.
  const retrySchedule = Schedule.exponential(Duration.millis(config.retryBaseDelayMs)).pipe(Schedule.jittered)

  /** One logical data call, shared by identical concurrent callers (`key`). */
  const dataCall = <A>(key: string, what: string, path: string, params: Record<string, string>, decode: Decoder<A>): Effect.Effect<A, CoinbaseError> =>
    flights.run(
      key,
      attempt(what, requestFor(path, params), decode, config.attemptTimeoutMs).pipe(
        Effect.retry({ schedule: retrySchedule, times: config.retries, while: (error) => error.kind === "transient" }),
        Effect.timeoutOrElse({
          duration: Duration.millis(config.requestBudgetMs),
          orElse: () => failWith("transient", `${what}: gave up after ${config.requestBudgetMs} ms`)
        }),
        (logical) => breaker.execute(logical, { key: BREAKER_KEY, classify: breakerOutcome }),
        // While another call probes a recovering Coinbase, wait for its verdict rather than refuse.
        Effect.retry({
          schedule: Schedule.spaced(Duration.millis(PROBE_POLL_MS)),
          times: Math.ceil(config.attemptTimeoutMs / PROBE_POLL_MS),
          while: (error) => error._tag === "CircuitBreakerError" && error.reason._tag === "CircuitHalfOpen"
        }),
        Effect.catchTag("CircuitBreakerError", (error) =>
          error.reason._tag === "CircuitOpen"
            ? failWith("circuit-open", "too many Coinbase failures; not calling it for now", Math.ceil(Duration.toSeconds(error.reason.retryAfter)))
            : failWith("circuit-open", "Coinbase is being probed after an outage", Math.ceil(config.attemptTimeoutMs / 1000))),
        Effect.withSpan("coinbase.call", { attributes: { what } })
      )
    )

  const productPath = (productId: string) => `/products/${encodeURIComponent(productId)}`

  const index = yield* makeProductIndex({
    // Large (hundreds of products): more time for its one attempt.
    fetch: attempt("product list", requestFor("/products", {}), decodeProducts, config.attemptTimeoutMs * 3).pipe(
      Effect.withSpan("coinbase.call", { attributes: { what: "product list" } })
    ),
    refreshMs: config.productsRefreshMs,
    retryMs: config.productsRetryMs
  })
  if (config.fallback === "coinbase") yield* index.warm

  const products = Effect.flatMap(Clock.currentTimeMillis, (now) => index.get(now + config.attemptTimeoutMs))
  const lookups = new WeakMap<ReadonlyArray<CoinbaseProduct>, ReadonlyMap<string, CoinbaseProduct>>()
  const lookupOf = (list: ReadonlyArray<CoinbaseProduct>) => {
    let lookup = lookups.get(list)
    if (lookup === undefined) {
      lookup = new Map(list.map((p) => [`${p.base}-${p.quote}`, p]))
      lookups.set(list, lookup)
    }
    return lookup
  }

  const candlesOf = (productId: string, start: number, end: number): Effect.Effect<ReadonlyArray<Candle>, CoinbaseError> =>
    dataCall(`candles:${productId}:${start}:${end}`, `daily candles of ${productId}`, `${productPath(productId)}/candles`, {
      granularity: String(DAILY_GRANULARITY_S),
      start: new Date(start).toISOString(),
      end: new Date(end).toISOString()
    }, decodeCandles)

  const dailyCandles = (productId: string, fromDay: number, toDay: number) =>
    Effect.gen(function*() {
      const from = startOfUtcDay(fromDay)
      const to = startOfUtcDay(toDay)
      const parts = yield* Effect.forEach(dayWindows(from, to), ([start, end]) => candlesOf(productId, start, end), { concurrency: "unbounded" })
      const { closes, offMidnight } = dailyCloses(parts.flat(), from, to)
      if (offMidnight !== undefined) {
        return yield* failWith("invalid-response", `daily candles of ${productId}: a candle at ${new Date(offMidnight).toISOString()}, not 00:00 UTC`)
      }
      return closes
    })

  return CoinbaseClient.of({
    products,
    productFor: (base, quote) => Effect.map(products, (list) => lookupOf(list).get(`${base.toUpperCase()}-${quote.toUpperCase()}`)),
    dailyCandles,
    ticker: (productId) => dataCall(`ticker:${productId}`, `ticker of ${productId}`, `${productPath(productId)}/ticker`, {}, decodeTicker),
    stats: (productId) => dataCall(`stats:${productId}`, `24 h stats of ${productId}`, `${productPath(productId)}/stats`, {}, decodeStats)
  })
})
