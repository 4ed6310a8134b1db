/**
 * Who pays for an upstream call, and the budgets it is paid from (CONTRACT C4, "Under abuse and faults").
 *
 * Three token buckets, all in the `RateLimiter`'s store (memory, or Redis shared by every instance):
 *   - the whole budget (`COINGECKO_CALLS_PER_MIN`): every call;
 *   - the cold pool (the budget but `COINGECKO_REFRESH_RESERVE_PCT` of it): calls a request waits for,
 *     so that refreshes of what many callers ask for and the auxiliary lists always find a token;
 *   - the caller's share (`COINGECKO_CALLER_SHARE_PCT` of the budget): the first attempt of each call
 *     a request waits for, charged to its caller; its excess is that caller's own 503, taken before any
 *     shared token is spent. Retries are the upstream's doing: they spend the shared buckets only.
 * A request runs under a `CurrentCharge` (CoinGeckoRates.ts sets it); background refreshes and the
 * auxiliary lists run without one.
 * Then the month's credits (credits/MonthlyBudget.ts), after the buckets of the minute: a call a request
 * waits for takes a "cold" credit, any other a "refresh" credit; every attempt is a credit billed.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { CircuitBreaker, RateLimiter, type Redis } from "effect/persistence"
import { type CoinGeckoError, failWith } from "./coinGeckoResponses.ts"
import type { MonthlyBudget } from "./credits/MonthlyBudget.ts"
import type { RatesConfigShape } from "./RatesConfig.ts"

/** The request an upstream call is made for. Mutable on purpose: one request, one failure in the breaker. */
export interface UpstreamCharge {
  /** `RatesQuery.caller`; undefined: a cold fetch charged to no one's share (internal callers, tests). */
  readonly caller: string | undefined
  /** Set when one of this request's calls has counted a failure in the breaker. */
  failureCounted: boolean
}

/** The charge of the running request; undefined in background work. */
export const CurrentCharge = Context.Reference<UpstreamCharge | undefined>("app/rates/CurrentCharge", {
  defaultValue: () => undefined
})

export const chargeFor = (caller: string | undefined): UpstreamCharge => ({ caller, failureCounted: false })

/**
 * The breaker's verdict on a call, counted at most once per request: retries are already inside one
 * call, and a request whose calls all fail for the same reason is one failure, not one per coin.
 */
export const countOncePerRequest = (outcome: CircuitBreaker.Outcome, charge: UpstreamCharge | undefined): CircuitBreaker.Outcome => {
  if (outcome._tag !== "Failure" || charge === undefined) return outcome
  if (charge.failureCounted) return CircuitBreaker.ignored
  charge.failureCounted = true
  return outcome
}

/**
 * Callers are hashed into 65,536 buckets: the memory store keeps one small state per key for good, so
 * the number of keys is bounded whatever the number of addresses; and no address is written to Redis.
 */
const callerBucket = (caller: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < caller.length; i++) hash = Math.imul(hash ^ caller.charCodeAt(i), 0x01000193) >>> 0
  return hash & 0xffff
}

export interface Budget {
  /** Spends what one attempt of a call costs; fails `rate-limited` (with Retry-After) when a bucket is empty. */
  readonly spend: (charge: UpstreamCharge | undefined, firstAttempt: boolean) => Effect.Effect<void, CoinGeckoError>
}

export const makeBudget = (config: RatesConfigShape, limiter: RateLimiter.RateLimiter, month: MonthlyBudget["Service"]): Budget => {
  const bucket = (key: string, limit: number, spent: string) =>
    limiter.consume({ key, algorithm: "token-bucket", onExceeded: "fail", limit, window: "1 minute" }).pipe(
      Effect.asVoid,
      Effect.catchTag("RateLimiterError", (error) =>
        error.reason._tag === "RateLimitExceeded"
          ? failWith("rate-limited", spent, Math.ceil(Duration.toSeconds(error.reason.retryAfter)))
          // The limiter's store is down (Redis): better to call than to refuse every request.
          : Effect.logWarning("rates: upstream budget store unavailable; calling without it", error.reason.message))
    )
  const coldLimit = Math.max(1, config.callsPerMinute - config.refreshReservePerMinute)
  const whole = bucket("coingecko:calls", config.callsPerMinute, `our upstream budget of ${config.callsPerMinute} calls/min is spent`)
  const cold = bucket("coingecko:cold", coldLimit, `the budget for new data (${coldLimit} calls/min) is spent`)
  const shareSpent = `this caller's share of the upstream budget (${config.callerCallsPerMinute} calls/min) is spent`
  const share = (caller: string) => bucket(`coingecko:caller:${callerBucket(caller)}`, config.callerCallsPerMinute, shareSpent)

  return {
    spend: (charge, firstAttempt) => {
      if (charge === undefined) return Effect.andThen(whole, month.spend("refresh"))
      const shared = Effect.andThen(Effect.andThen(cold, whole), month.spend("cold"))
      return charge.caller !== undefined && firstAttempt ? Effect.andThen(share(charge.caller), shared) : shared
    }
  }
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
