/**
 * What a CoinGecko call costs, asked by the client before each attempt (CONTRACT C4, "Under abuse and
 * faults" and "Over a month"), from the `Charge` its caller decided:
 *   - the whole budget of the minute (`COINGECKO_CALLS_PER_MIN`): every call;
 *   - the cold pool (the minute's budget but `COINGECKO_REFRESH_RESERVE_PCT` of it): calls a request
 *     waits for, so that refreshes of what many callers ask for and the lists always find a token;
 *   - the caller's share (`COINGECKO_CALLER_SHARE_PCT`): the first attempt of each call a request waits
 *     for, charged to its caller; its excess is that caller's own 503, taken before any shared token is
 *     spent. Retries are the source's doing: they spend the shared buckets only;
 *   - then the month's credits (credits/MonthlyBudget.ts): a "cold" credit for a request, a "refresh"
 *     credit for background work, "lists" credits for the lists, held by the attempt until CoinGecko
 *     answers, given back when it did not bill it (the client decides: only an answer 200 is billed).
 * Every attempt counts against the minute's buckets, refused or not (CoinGecko counts it too).
 * The buckets live in the `RateLimiter`'s store: memory, or Redis shared by every instance. When that
 * store fails, the buckets hold in this process instead, each limit divided by the workers it knows of
 * (WEB_CONCURRENCY): never calls without a budget.
 */
import { Duration, Effect } from "effect"
import type { RateLimiter } from "effect/persistence"
import { type Charge, failWithFor, type SourceError } from "../upstream.ts"
import type { CoinGeckoConfigShape } from "./CoinGeckoConfig.ts"
import type { HeldCredits, MonthlyBudget } from "./credits/MonthlyBudget.ts"

const fail = failWithFor("coingecko")

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
  /**
   * What one attempt of a data call costs: its minute's tokens, then a month's credit held for it; fails
   * `rate-limited` (with Retry-After) when a bucket or the month's part is empty.
   */
  readonly spend: (charge: Charge, firstAttempt: boolean) => Effect.Effect<HeldCredits, SourceError>
  /** One call for the lists: a token of the minute's whole budget (their credits: `listCredits`). */
  readonly listCall: Effect.Effect<void, SourceError>
  /** The month's credits of `calls` calls for a list, from the lists' part, held together: all or none. */
  readonly listCredits: (calls: number) => Effect.Effect<HeldCredits, SourceError>
}

/**
 * `limiter` keeps the buckets (memory, or Redis for several instances); `ownLimiter`, always in memory,
 * keeps this process's share of them while `limiter`'s store fails.
 */
export const makeBudget = (
  config: CoinGeckoConfigShape,
  limiter: RateLimiter.RateLimiter,
  ownLimiter: RateLimiter.RateLimiter,
  month: MonthlyBudget["Service"]
): Budget => {
  let storeFailing = false
  const exceeded = (spent: string) => (error: RateLimiter.RateLimiterError) =>
    error.reason._tag === "RateLimitExceeded" ? fail("rate-limited", spent, Math.ceil(Duration.toSeconds(error.reason.retryAfter))) : Effect.die(error)
  const bucket = (key: string, limit: number, spent: string) => {
    const own = ownLimiter.consume({ key, algorithm: "token-bucket", onExceeded: "fail", limit: Math.max(1, Math.floor(limit / config.workers)), window: "1 minute" })
    return limiter.consume({ key, algorithm: "token-bucket", onExceeded: "fail", limit, window: "1 minute" }).pipe(
      Effect.tap(() => Effect.sync(() => void (storeFailing = false))),
      Effect.catchTag("RateLimiterError", (error) =>
        error.reason._tag === "RateLimitExceeded"
          ? exceeded(spent)(error)
          // The limiter's store is down (Redis): this process's share of the bucket, never no bucket.
          : Effect.andThen(
            storeFailing ? Effect.void : Effect.logWarning("rates: upstream budget store unavailable; this process's share of it meanwhile", error.reason.message),
            Effect.andThen(Effect.sync(() => void (storeFailing = true)), Effect.catchTag(own, "RateLimiterError", exceeded(spent)))
          )),
      Effect.asVoid
    )
  }
  const coldLimit = Math.max(1, config.callsPerMinute - config.refreshReservePerMinute)
  const whole = bucket("coingecko:calls", config.callsPerMinute, `our upstream budget of ${config.callsPerMinute} calls/min is spent`)
  const cold = bucket("coingecko:cold", coldLimit, `the budget for new data (${coldLimit} calls/min) is spent`)
  const shareSpent = `this caller's share of the upstream budget (${config.callerCallsPerMinute} calls/min) is spent`
  const share = (caller: string) => bucket(`coingecko:caller:${callerBucket(caller)}`, config.callerCallsPerMinute, shareSpent)

  return {
    listCall: whole,
    listCredits: (calls) => month.spend("lists", calls),
    spend: (charge, firstAttempt) => {
      if (charge._tag === "Background") return Effect.andThen(whole, month.spend("refresh"))
      const shared = Effect.andThen(Effect.andThen(cold, whole), month.spend("cold"))
      return charge.caller !== undefined && firstAttempt ? Effect.andThen(share(charge.caller), shared) : shared
    }
  }
}
