/**
 * The CoinGecko HTTP API as we use it: six GET endpoints, each body validated (coinGeckoResponses.ts),
 * every upstream misbehaviour a typed `CoinGeckoError` (never a defect).
 *
 * Data calls (latest prices, daily series) are guarded, outermost first:
 *   circuit breaker → overall time budget → retries (transient only) → per attempt:
 *   429 cool-down → budget (upstreamGuards.ts: the caller's share, the cold pool, the whole) →
 *   concurrency permit → HTTP with a timeout.
 * Budget and permit are taken per attempt because each attempt is one upstream call; the breaker sees
 * one outcome per logical call, and at most one failure per request (`countOncePerRequest`).
 *
 * Auxiliary calls (the currency list, the coin list and ranks) are loaded in the background
 * (auxiliary.ts), which remembers their failures and backs off: here they get one attempt each, spend
 * the whole budget only, and stay outside the breaker, so that their outage never refuses data calls.
 */
import { Clock, Context, Duration, Effect, Layer, Redacted, Result, Schedule, Semaphore } from "effect"
import { Headers, HttpClient, HttpClientRequest } from "effect/http"
import { CircuitBreaker, RateLimiter, type Redis } from "effect/persistence"
import { recordUpstreamCall } from "../observability/metrics.ts"
import {
  type ChartPoint,
  CoinGeckoError,
  decodeCoinList,
  decodeMarketChart,
  decodeMarkets,
  type Decoder,
  decodeSupportedCurrencies,
  failWith,
  interpretResponse,
  type ListedCoin,
  type MarketRow,
  type RawResponse
} from "./coinGeckoResponses.ts"
import { MonthlyBudget } from "./credits/MonthlyBudget.ts"
import { RatesConfig } from "./RatesConfig.ts"
import { countOncePerRequest, CurrentCharge, layerUpstreamGuardsMemory, layerUpstreamGuardsRedis, makeBudget } from "./upstreamGuards.ts"
import { breakerOutcome } from "./upstreamFailure.ts"

export { type ChartPoint, CoinGeckoError, type CoinGeckoFailureKind, type ListedCoin, type MarketRow, toRatesError } from "./coinGeckoResponses.ts"
export { layerUpstreamGuardsMemory, layerUpstreamGuardsRedis } from "./upstreamGuards.ts"

export interface CoinGeckoClientShape {
  /** Auxiliary. `/simple/supported_vs_currencies`: lower-case codes. */
  readonly supportedCurrencies: Effect.Effect<ReadonlyArray<string>, CoinGeckoError>
  /** Auxiliary. `/coins/list`: every coin's id, ticker and name. */
  readonly coinList: Effect.Effect<ReadonlyArray<ListedCoin>, CoinGeckoError>
  /** Auxiliary. `/coins/markets` in usd by market cap, one page (from 1): the ranks. */
  readonly coinsByRank: (page: number, perPage: number) => Effect.Effect<ReadonlyArray<MarketRow>, CoinGeckoError>
  /** `/coins/markets` for coin ids, with 24h/7d/30d changes. */
  readonly marketsByIds: (vsCurrency: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<MarketRow>, CoinGeckoError>
  /**
   * `/coins/{id}/market_chart/range` with daily points from `fromSeconds` to `toSeconds` (UNIX seconds,
   * both included): the days a held history lacks. Fails with kind not-found for an unknown id.
   */
  readonly marketChartRange: (id: string, vsCurrency: string, fromSeconds: number, toSeconds: number) => Effect.Effect<ReadonlyArray<ChartPoint>, CoinGeckoError>
}

export class CoinGeckoClient extends Context.Service<CoinGeckoClient, CoinGeckoClientShape>()("app/CoinGeckoClient") {
  /**
   * Requires the HTTP client, our config, a `RateLimiter` (memory or Redis store) and a circuit-breaker
   * store, so several instances can share budget and breaker state when those are backed by Redis.
   */
  static readonly layerNoDeps: Layer.Layer<
    CoinGeckoClient,
    never,
    HttpClient.HttpClient | RatesConfig | MonthlyBudget | RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore
  > = Layer.effect(CoinGeckoClient, Effect.suspend(() => makeCoinGeckoClient))

  /** One instance: budget and breaker in memory. */
  static readonly layer: Layer.Layer<CoinGeckoClient, never, HttpClient.HttpClient | RatesConfig | MonthlyBudget> = CoinGeckoClient.layerNoDeps.pipe(
    Layer.provide(layerUpstreamGuardsMemory)
  )

  /** Several instances: budget and breaker shared through Redis, under `keyPrefix`. */
  static readonly layerRedis = (keyPrefix: string): Layer.Layer<CoinGeckoClient, never, HttpClient.HttpClient | RatesConfig | MonthlyBudget | Redis.Redis> =>
    CoinGeckoClient.layerNoDeps.pipe(Layer.provide(layerUpstreamGuardsRedis(keyPrefix)))
}

const CHANGE_WINDOWS = "24h,7d,30d"
const BREAKER_KEY = "coingecko"
const PROBE_POLL_MS = 25

type CallKind = "data" | "auxiliary"

const makeCoinGeckoClient = Effect.gen(function*() {
  const config = yield* RatesConfig
  const http = yield* HttpClient.HttpClient
  const budget = makeBudget(config, yield* RateLimiter.RateLimiter, yield* MonthlyBudget)
  const breaker = yield* CircuitBreaker.make({
    tripPolicy: CircuitBreaker.consecutive(config.breakerFailures),
    openDuration: Duration.millis(config.breakerOpenMs)
  })
  const permits = yield* Semaphore.make(config.maxConcurrency)
  // After a 429 nobody calls the upstream until its Retry-After has passed: hammering it only extends the ban.
  let coolDownUntil = 0

  const keyHeader = config.apiPlan === "pro" ? "x-cg-pro-api-key" : "x-cg-demo-api-key"
  const withKey = (request: HttpClientRequest.HttpClientRequest) =>
    config.apiKey === undefined ? request : HttpClientRequest.setHeader(request, keyHeader, Redacted.value(config.apiKey))

  const checkCoolDown = Effect.flatMap(Clock.currentTimeMillis, (now) =>
    now < coolDownUntil
      ? failWith("rate-limited", "upstream asked us to slow down (cooling down after 429)", Math.ceil((coolDownUntil - now) / 1000))
      : Effect.void)

  const retryAfterSecondsOf = (headers: Headers.Headers, now: number) => {
    const header = headers["retry-after"]
    if (header === undefined) return config.defaultRetryAfterSeconds
    const parsed = Headers.parseRetryAfter(header)
    if (Result.isFailure(parsed)) return config.defaultRetryAfterSeconds
    const seconds = Math.ceil(Duration.toSeconds(Headers.retryAfterDelay(parsed.success, now)))
    return Math.min(Math.max(seconds, 1), 3_600)
  }

  /** One HTTP exchange, read; a 429 starts the cool-down. */
  const send = <A>(what: string, request: HttpClientRequest.HttpClientRequest, decode: Decoder<A>, timeoutMs: number) =>
    Effect.gen(function*() {
      const response = yield* http.execute(request)
      const body = yield* response.text
      recordUpstreamCall("coingecko", String(response.status))
      return { status: response.status, headers: response.headers, body }
    }).pipe(
      Effect.tapError(() => Effect.sync(() => recordUpstreamCall("coingecko", "failed"))),
      Effect.catchTag("HttpClientError", (error) =>
        failWith("transient", `${error.reason._tag}${"description" in error.reason && error.reason.description ? `: ${error.reason.description}` : ""}`)),
      Effect.timeoutOrElse({
        duration: Duration.millis(timeoutMs),
        orElse: () => failWith("transient", `no answer within ${timeoutMs} ms`)
      }),
      Effect.flatMap((raw: RawResponse & { readonly headers: Headers.Headers }) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          let seconds = 0
          return interpretResponse(what, raw, decode, () => (seconds = retryAfterSecondsOf(raw.headers, now))).pipe(
            Effect.tapError(() =>
              Effect.sync(() => {
                if (seconds > 0) coolDownUntil = Math.max(coolDownUntil, now + seconds * 1000)
              })
            )
          )
        }))
    )

  // Jitter keeps instances that failed together from retrying in lockstep.
  const retrySchedule = Schedule.exponential(Duration.millis(config.retryBaseDelayMs)).pipe(Schedule.jittered)

  /**
   * One logical upstream call. Lazy: the request and its guard pipeline are built when the effect runs,
   * so callers can hand it to a cache that usually does not need it without paying for it.
   */
  const call = <A>(kind: CallKind, what: string, path: string, params: Record<string, string>, decode: Decoder<A>) =>
    Effect.suspend(() => (kind === "data" ? dataCall(what, path, params, decode) : auxiliaryCall(what, path, params, decode)))

  const requestFor = (path: string, params: Record<string, string>) =>
    withKey(HttpClientRequest.get(`${config.baseUrl}${path}`).pipe(HttpClientRequest.setUrlParams(params), HttpClientRequest.acceptJson))

  /** Bodies of the auxiliary lists are large (the coin list is over a MB): more time per attempt. */
  const auxiliaryTimeoutMs = config.attemptTimeoutMs * 3

  const auxiliaryCall = <A>(what: string, path: string, params: Record<string, string>, decode: Decoder<A>): Effect.Effect<A, CoinGeckoError> =>
    checkCoolDown.pipe(
      Effect.andThen(budget.spend(undefined, true)),
      Effect.andThen(permits.withPermit(send(what, requestFor(path, params), decode, auxiliaryTimeoutMs))),
      Effect.withSpan("coingecko.call", { attributes: { what } })
    )

  const dataCall = <A>(what: string, path: string, params: Record<string, string>, decode: Decoder<A>): Effect.Effect<A, CoinGeckoError> =>
    Effect.gen(function*() {
      const charge = yield* CurrentCharge
      const request = requestFor(path, params)
      let attempts = 0
      const attempt = checkCoolDown.pipe(
        Effect.andThen(Effect.suspend(() => budget.spend(charge, attempts++ === 0))),
        Effect.andThen(permits.withPermit(send(what, request, decode, config.attemptTimeoutMs)))
      )
      return yield* attempt.pipe(
        Effect.retry({ schedule: retrySchedule, times: config.retries, while: (error) => error.kind === "transient" }),
        Effect.timeoutOrElse({
          duration: Duration.millis(config.requestBudgetMs),
          orElse: () => failWith("transient", `${what}: gave up after ${config.requestBudgetMs} ms`)
        }),
        (logical) => breaker.execute(logical, { key: BREAKER_KEY, classify: (exit) => countOncePerRequest(breakerOutcome(exit), charge) }),
        // While another call probes a recovering upstream, wait for its verdict rather than refuse.
        Effect.retry({
          schedule: Schedule.spaced(Duration.millis(PROBE_POLL_MS)),
          times: Math.ceil(config.attemptTimeoutMs / PROBE_POLL_MS),
          while: (error) => error._tag === "CircuitBreakerError" && error.reason._tag === "CircuitHalfOpen"
        }),
        Effect.catchTag("CircuitBreakerError", (error) =>
          error.reason._tag === "CircuitOpen"
            ? failWith("circuit-open", "too many upstream failures; not calling it for now", Math.ceil(Duration.toSeconds(error.reason.retryAfter)))
            : failWith("circuit-open", "upstream is being probed after an outage", Math.ceil(config.attemptTimeoutMs / 1000)))
      )
    }).pipe(Effect.withSpan("coingecko.call", { attributes: { what } }))

  return CoinGeckoClient.of({
    supportedCurrencies: call("auxiliary", "supported currencies", "/simple/supported_vs_currencies", {}, decodeSupportedCurrencies),
    coinList: call("auxiliary", "coin list", "/coins/list", {}, decodeCoinList),
    coinsByRank: (page, perPage) =>
      call("auxiliary", `coin ranks page ${page}`, "/coins/markets", {
        vs_currency: "usd",
        order: "market_cap_desc",
        per_page: String(perPage),
        page: String(page)
      }, decodeMarkets),
    marketsByIds: (vsCurrency, ids) =>
      call("data", "markets", "/coins/markets", {
        vs_currency: vsCurrency,
        ids: ids.join(","),
        per_page: String(Math.min(250, Math.max(1, ids.length))),
        price_change_percentage: CHANGE_WINDOWS
      }, decodeMarkets),
    marketChartRange: (id, vsCurrency, fromSeconds, toSeconds) =>
      call("data", `market chart range of ${id}`, `/coins/${encodeURIComponent(id)}/market_chart/range`, {
        vs_currency: vsCurrency,
        from: String(fromSeconds),
        to: String(toSeconds),
        interval: "daily"
      }, decodeMarketChart)
  })
})
