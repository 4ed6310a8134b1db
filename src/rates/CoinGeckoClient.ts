/**
 * The CoinGecko HTTP API as we use it: three GET endpoints, each body validated with Schema, every
 * upstream misbehaviour turned into a typed `CoinGeckoError` (never a defect).
 *
 * Every logical call is guarded, outermost first:
 *   circuit breaker → overall time budget → retries (transient only) → per attempt:
 *   429 cool-down → calls-per-minute budget → concurrency permit → HTTP with a timeout.
 * Budget and permit are taken per attempt because each attempt is one upstream call; the breaker sees
 * one outcome per logical call so retries do not trip it on their own.
 */
import { Cause, Clock, Context, Data, Duration, Effect, Exit, Layer, Option, Redacted, Result, Schedule, Schema, Semaphore } from "effect"
import { Headers, HttpClient, HttpClientRequest } from "effect/http"
import { CircuitBreaker, RateLimiter, type Redis } from "effect/persistence"
import { recordUpstreamCall } from "../observability/metrics.ts"
import { RatesConfig } from "./RatesConfig.ts"
import { RatesUnavailableError, RatesUpstreamError } from "./RatesProvider.ts"

// ---------------------------------------------------------------------------------------------------
// Errors

export type CoinGeckoFailureKind =
  /** 5xx, 408, timeout, connection reset: safe to retry a GET. */
  | "transient"
  /** A 2xx whose body is not JSON, is cut short, or has the wrong shape. */
  | "invalid-response"
  /** 401/403 (our key refused) or another 4xx we do not expect. Retrying cannot help. */
  | "rejected"
  /** 404 with CoinGecko's JSON error: the coin id does not exist. An answer, not a fault. */
  | "not-found"
  /** Upstream 429, or our own cool-down after one, or our calls-per-minute budget is spent. */
  | "rate-limited"
  /** The circuit breaker refuses calls after repeated failures. */
  | "circuit-open"

export class CoinGeckoError extends Data.TaggedError("CoinGeckoError")<{
  readonly kind: CoinGeckoFailureKind
  readonly detail: string
  /** Whole seconds to wait before asking again; meaningful for rate-limited and circuit-open. */
  readonly retryAfterSeconds: number
}> {
  override get message() {
    return `CoinGecko ${this.kind}: ${this.detail}`
  }
}

const failWith = (kind: CoinGeckoFailureKind, detail: string, retryAfterSeconds = 0) =>
  Effect.fail(new CoinGeckoError({ kind, detail, retryAfterSeconds }))

/** The public error for a failure (not-found is handled by callers before this). */
export const toRatesError = (error: CoinGeckoError): RatesUpstreamError | RatesUnavailableError =>
  error.kind === "rate-limited" || error.kind === "circuit-open"
    ? new RatesUnavailableError({ reason: error.message, retryAfterSeconds: Math.max(1, error.retryAfterSeconds) })
    : new RatesUpstreamError({ reason: error.message })

// ---------------------------------------------------------------------------------------------------
// Bodies

const NullableNumber = Schema.optional(Schema.NullOr(Schema.Finite))

/** One row of `/coins/markets`. Only what we read; extra members are ignored. */
export const MarketRow = Schema.Struct({
  id: Schema.NonEmptyString,
  symbol: Schema.String,
  name: Schema.String,
  current_price: Schema.NullOr(Schema.Finite),
  market_cap_rank: NullableNumber,
  price_change_percentage_24h: NullableNumber,
  price_change_percentage_24h_in_currency: NullableNumber,
  price_change_percentage_7d_in_currency: NullableNumber,
  price_change_percentage_30d_in_currency: NullableNumber
})
export type MarketRow = typeof MarketRow.Type

const MarketsBody = Schema.Array(MarketRow)

/** `/coins/{id}/market_chart`: `[epoch ms, price]`; CoinGecko sometimes sends a null price. */
const MarketChartBody = Schema.Struct({
  prices: Schema.Array(Schema.Tuple([Schema.Finite, Schema.NullOr(Schema.Finite)]))
})
export type ChartPoint = readonly [number, number | null]

const SupportedCurrenciesBody = Schema.Array(Schema.String)

/** CoinGecko's three error shapes (the docs, the 365-day error, and the 404 respectively). */
const ErrorStatus = Schema.Struct({
  error_code: Schema.optional(Schema.Union([Schema.Number, Schema.String])),
  error_message: Schema.optional(Schema.String)
})
const ErrorBody = Schema.Union([
  Schema.Struct({ status: ErrorStatus }),
  Schema.Struct({ error: Schema.Struct({ status: ErrorStatus }) }),
  Schema.Struct({ error: Schema.String })
])

const decodeJsonText = Schema.decodeUnknownExit(Schema.fromJsonString(Schema.Unknown))
const decodeErrorBody = Schema.decodeUnknownExit(ErrorBody)
const decodeMarkets = Schema.decodeUnknownExit(MarketsBody)
const decodeMarketChart = Schema.decodeUnknownExit(MarketChartBody)
const decodeSupportedCurrencies = Schema.decodeUnknownExit(SupportedCurrenciesBody)

const clip = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

/** What the upstream said about its error, for logs and the error `reason`; undefined when it is not JSON. */
const upstreamErrorMessage = (body: string): string | undefined => {
  const json = decodeJsonText(body)
  if (Exit.isFailure(json)) return undefined
  const parsed = decodeErrorBody(json.value)
  if (Exit.isFailure(parsed)) return clip(JSON.stringify(json.value))
  const value = parsed.value
  if ("status" in value) return describeStatus(value.status)
  return typeof value.error === "string" ? value.error : describeStatus(value.error.status)
}

const describeStatus = (status: typeof ErrorStatus.Type) =>
  [status.error_code === undefined ? undefined : `code ${status.error_code}`, status.error_message]
    .filter((part) => part !== undefined).join(": ") || "no message"

const bodyKind = (body: string) => (/^\s*</.test(body) ? "an HTML page" : body.trim() === "" ? "an empty body" : "a non-JSON body")

// ---------------------------------------------------------------------------------------------------
// Service

export interface CoinGeckoClientShape {
  /** `/simple/supported_vs_currencies`: lower-case codes. */
  readonly supportedCurrencies: Effect.Effect<ReadonlyArray<string>, CoinGeckoError>
  /** `/coins/markets` for coin ids, with 24h/7d/30d changes. */
  readonly marketsByIds: (vsCurrency: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<MarketRow>, CoinGeckoError>
  /** `/coins/markets` by ticker (lower-case), top-ranked coin per symbol. */
  readonly marketsBySymbols: (vsCurrency: string, symbols: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<MarketRow>, CoinGeckoError>
  /** `/coins/{id}/market_chart` with daily points; fails with kind not-found for an unknown id. */
  readonly marketChart: (id: string, vsCurrency: string, days: number) => Effect.Effect<ReadonlyArray<ChartPoint>, CoinGeckoError>
}

/** Budget and breaker state shared by every instance through Redis (REDIS_URL); `keyPrefix` namespaces it. */
export const layerUpstreamGuardsRedis = (
  keyPrefix = ""
): Layer.Layer<RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore, never, Redis.Redis> =>
  Layer.mergeAll(
    RateLimiter.layer.pipe(Layer.provide(RateLimiter.layerStoreRedis({ prefix: `${keyPrefix}ratelimiter:` }))),
    CircuitBreaker.layerStoreRedis({ prefix: `${keyPrefix}circuitbreaker:` })
  )

/** The memory-backed budget and breaker stores, for a single instance. */
export const layerUpstreamGuardsMemory: Layer.Layer<RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore> = Layer.mergeAll(
  RateLimiter.layer.pipe(Layer.provide(RateLimiter.layerStoreMemory)),
  CircuitBreaker.layerStoreMemory()
)

export class CoinGeckoClient extends Context.Service<CoinGeckoClient, CoinGeckoClientShape>()("app/CoinGeckoClient") {
  /**
   * Requires the HTTP client, our config, a `RateLimiter` (memory or Redis store) and a circuit-breaker
   * store, so several instances can share budget and breaker state when those are backed by Redis.
   */
  static readonly layerNoDeps: Layer.Layer<
    CoinGeckoClient,
    never,
    HttpClient.HttpClient | RatesConfig | RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore
  > = Layer.effect(CoinGeckoClient, Effect.suspend(() => makeCoinGeckoClient))

  /** One instance: budget and breaker in memory. */
  static readonly layer: Layer.Layer<CoinGeckoClient, never, HttpClient.HttpClient | RatesConfig> = CoinGeckoClient.layerNoDeps.pipe(
    Layer.provide(layerUpstreamGuardsMemory)
  )

  /** Several instances: budget and breaker shared through Redis, under `keyPrefix`. */
  static readonly layerRedis = (keyPrefix: string): Layer.Layer<CoinGeckoClient, never, HttpClient.HttpClient | RatesConfig | Redis.Redis> =>
    CoinGeckoClient.layerNoDeps.pipe(Layer.provide(layerUpstreamGuardsRedis(keyPrefix)))
}

const CHANGE_WINDOWS = "24h,7d,30d"
const BREAKER_KEY = "coingecko"
const BUDGET_KEY = "coingecko:calls"

interface RawResponse {
  readonly status: number
  readonly headers: Headers.Headers
  readonly body: string
}

const makeCoinGeckoClient = Effect.gen(function*() {
  const config = yield* RatesConfig
  const http = yield* HttpClient.HttpClient
  const limiter = yield* RateLimiter.RateLimiter
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

  const spendBudget = limiter.consume({
    key: BUDGET_KEY,
    algorithm: "token-bucket",
    onExceeded: "fail",
    limit: config.callsPerMinute,
    window: "1 minute"
  }).pipe(
    Effect.asVoid,
    Effect.catchTag("RateLimiterError", (error) =>
      error.reason._tag === "RateLimitExceeded"
        ? failWith(
          "rate-limited",
          `our upstream budget of ${config.callsPerMinute} calls/min is spent`,
          Math.ceil(Duration.toSeconds(error.reason.retryAfter))
        )
        // The limiter's store is down (Redis): better to call than to refuse every request.
        : Effect.logWarning("rates: upstream budget store unavailable; calling without it", error.reason.message))
  )

  const send = (request: HttpClientRequest.HttpClientRequest): Effect.Effect<RawResponse, CoinGeckoError> =>
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
        duration: Duration.millis(config.attemptTimeoutMs),
        orElse: () => failWith("transient", `no answer within ${config.attemptTimeoutMs} ms`)
      })
    )

  const retryAfterSecondsOf = (headers: Headers.Headers, now: number) => {
    const header = headers["retry-after"]
    if (header === undefined) return config.defaultRetryAfterSeconds
    const parsed = Headers.parseRetryAfter(header)
    if (Result.isFailure(parsed)) return config.defaultRetryAfterSeconds
    const seconds = Math.ceil(Duration.toSeconds(Headers.retryAfterDelay(parsed.success, now)))
    return Math.min(Math.max(seconds, 1), 3_600)
  }

  /** Status and body → value or typed failure. */
  const interpret = <A>(
    what: string,
    raw: RawResponse,
    decode: (json: unknown) => Exit.Exit<A, Schema.SchemaError>
  ): Effect.Effect<A, CoinGeckoError> =>
    Effect.gen(function*() {
      const { body, status } = raw
      if (status >= 200 && status < 300) {
        const json = decodeJsonText(body)
        if (Exit.isFailure(json)) {
          return yield* failWith("invalid-response", `${what}: ${status} with ${bodyKind(body)} that is not complete JSON (${body.length} chars)`)
        }
        const decoded = decode(json.value)
        if (Exit.isFailure(decoded)) {
          const issue = Option.match(Cause.findErrorOption(decoded.cause), { onNone: () => "undecodable", onSome: (e) => e.message })
          return yield* failWith("invalid-response", `${what}: unexpected body shape: ${clip(issue)}`)
        }
        return decoded.value
      }
      const said = upstreamErrorMessage(body) ?? bodyKind(body)
      if (status === 429) {
        const now = yield* Clock.currentTimeMillis
        const seconds = retryAfterSecondsOf(raw.headers, now)
        coolDownUntil = Math.max(coolDownUntil, now + seconds * 1000)
        return yield* failWith("rate-limited", `${what}: 429 (${clip(said)})`, seconds)
      }
      if (status === 404 && upstreamErrorMessage(body) !== undefined) {
        return yield* failWith("not-found", `${what}: 404 (${clip(said)})`)
      }
      if (status === 401 || status === 403) {
        return yield* failWith("rejected", `${what}: ${status}, our API key was refused (${clip(said)})`)
      }
      if (status === 408 || status >= 500) {
        return yield* failWith("transient", `${what}: ${status} (${clip(said)})`)
      }
      return yield* failWith("rejected", `${what}: unexpected ${status} (${clip(said)})`)
    })

  const breakerOutcome = (exit: Exit.Exit<unknown, CoinGeckoError>): CircuitBreaker.Outcome => {
    if (Exit.isSuccess(exit)) return CircuitBreaker.success
    const error = Cause.findErrorOption(exit.cause)
    if (Option.isNone(error)) return CircuitBreaker.failure()
    switch (error.value.kind) {
      case "transient":
      case "invalid-response":
        return CircuitBreaker.failure()
      case "not-found":
        return CircuitBreaker.success // the upstream answered correctly
      default:
        // Rate limits have their own cool-down; a refused key is a 502 to report, not an outage to hide.
        return CircuitBreaker.ignored
    }
  }

  // Jitter keeps instances that failed together from retrying in lockstep.
  const retrySchedule = Schedule.exponential(Duration.millis(config.retryBaseDelayMs)).pipe(Schedule.jittered)

  /**
   * One logical upstream call. Lazy: the request and its guard pipeline are built when the effect runs,
   * so callers can hand it to a cache that usually does not need it without paying for it.
   */
  const call = <A>(
    what: string,
    path: string,
    params: Record<string, string>,
    decode: (json: unknown) => Exit.Exit<A, Schema.SchemaError>
  ): Effect.Effect<A, CoinGeckoError> => Effect.suspend(() => buildCall(what, path, params, decode))

  const buildCall = <A>(
    what: string,
    path: string,
    params: Record<string, string>,
    decode: (json: unknown) => Exit.Exit<A, Schema.SchemaError>
  ): Effect.Effect<A, CoinGeckoError> => {
    const request = withKey(
      HttpClientRequest.get(`${config.baseUrl}${path}`).pipe(
        HttpClientRequest.setUrlParams(params),
        HttpClientRequest.acceptJson
      )
    )
    const attempt = checkCoolDown.pipe(
      Effect.andThen(spendBudget),
      Effect.andThen(permits.withPermit(send(request))),
      Effect.flatMap((raw) => interpret(what, raw, decode))
    )
    return attempt.pipe(
      Effect.retry({ schedule: retrySchedule, times: config.retries, while: (error) => error.kind === "transient" }),
      Effect.timeoutOrElse({
        duration: Duration.millis(config.requestBudgetMs),
        orElse: () => failWith("transient", `${what}: gave up after ${config.requestBudgetMs} ms`)
      }),
      (logical) => breaker.execute(logical, { key: BREAKER_KEY, classify: breakerOutcome }),
      Effect.catchTag("CircuitBreakerError", (error) =>
        error.reason._tag === "CircuitOpen"
          ? failWith("circuit-open", "too many upstream failures; not calling it for now", Math.ceil(Duration.toSeconds(error.reason.retryAfter)))
          : failWith("circuit-open", "upstream is being probed after an outage", Math.ceil(config.attemptTimeoutMs / 1000))),
      Effect.withSpan("coingecko.call", { attributes: { what } })
    )
  }

  return CoinGeckoClient.of({
    supportedCurrencies: call(
      "supported currencies",
      "/simple/supported_vs_currencies",
      {},
      decodeSupportedCurrencies
    ),
    marketsByIds: (vsCurrency, ids) =>
      call("markets", "/coins/markets", {
        vs_currency: vsCurrency,
        ids: ids.join(","),
        per_page: String(Math.min(250, Math.max(1, ids.length))),
        price_change_percentage: CHANGE_WINDOWS
      }, decodeMarkets),
    marketsBySymbols: (vsCurrency, symbols) =>
      call("symbol lookup", "/coins/markets", {
        vs_currency: vsCurrency,
        symbols: symbols.map((s) => s.toLowerCase()).join(","),
        include_tokens: "top",
        price_change_percentage: CHANGE_WINDOWS
      }, decodeMarkets),
    marketChart: (id, vsCurrency, days) =>
      call(`market chart of ${id}`, `/coins/${encodeURIComponent(id)}/market_chart`, {
        vs_currency: vsCurrency,
        days: String(days),
        interval: "daily"
      }, (json) => Exit.map(decodeMarketChart(json), (body) => body.prices))
  })
})
