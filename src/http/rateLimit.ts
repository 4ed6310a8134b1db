/**
 * Rate limits of CONTRACT C8: per IP for anonymous callers, per client (ten times the limit) with a
 * valid token, a fixed one-minute window per operation. In memory by default (Effect's RateLimiter
 * arithmetic on a store that forgets past windows); with REDIS_URL, counted in memory and shared
 * through Redis in batches (sharedCounter.ts), so every instance sees the others' counts within
 * a stated bound. When Redis fails, counting goes on in memory until Redis answers again (logged
 * once per outage): limits loosen to per-instance for a while, but no request goes unanswered.
 */
import { Clock, Context, Duration, Effect, Exit, Layer } from "effect"
import { HttpServerResponse } from "effect/http"
import { RateLimiter, Redis } from "effect/persistence"
import type { RateLimitPolicyName } from "../api/Api.ts"
import { RateLimited } from "../api/problems.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { addressBucket } from "./clientIp.ts"
import { type ProblemContext, problemResponse } from "./problemResponse.ts"
import { type Count, makeSharedCounts } from "./sharedCounter.ts"

const WindowSeconds = 60

export interface Decision {
  readonly policy: string
  readonly limit: number
  readonly remaining: number
  readonly resetSeconds: number
}

/** IETF draft-ietf-httpapi-ratelimit-headers: `RateLimit-Policy` and `RateLimit` fields. */
export const rateLimitHeaders = (d: Decision) => ({
  "ratelimit-policy": `"${d.policy}";q=${d.limit};w=${WindowSeconds}`,
  "ratelimit": `"${d.policy}";r=${Math.max(0, d.remaining)};t=${d.resetSeconds}`
})

/** The 429 of C8: the problem with Retry-After and the RateLimit fields of the exhausted policy. */
export const rateLimitedResponse = (
  policy: RateLimitPolicyName,
  limit: number,
  limited: RateLimited,
  ctx: ProblemContext
): HttpServerResponse.HttpServerResponse => {
  const retryAfter = limited.retryAfter ?? WindowSeconds
  return HttpServerResponse.setHeaders(
    problemResponse("rate_limited", ctx, { detail: limited.detail, retryAfter }),
    rateLimitHeaders({ policy, limit, remaining: 0, resetSeconds: retryAfter })
  )
}

/**
 * The counting key and limit of a request (C8): per address when anonymous (IPv4-mapped IPv6 as IPv4,
 * other IPv6 per /64), per client (x10) with a token.
 */
export const limitKey = (
  policy: RateLimitPolicyName,
  base: number,
  caller: { readonly clientId: string } | undefined,
  ip: string
): readonly [key: string, limit: number] =>
  caller === undefined ? [`${policy}:ip:${addressBucket(ip)}`, base] : [`${policy}:client:${caller.clientId}`, base * 10]

const windowMillis = WindowSeconds * 1000
const decisionOf = (policy: string, limit: number, remaining: number, resetAfterMillis: number): Decision => ({
  policy,
  limit,
  remaining,
  resetSeconds: Math.max(1, Math.ceil(resetAfterMillis / 1000))
})
const limitedOf = (limit: number, retryAfterMillis: number) =>
  new RateLimited({
    detail: `The limit of ${limit} requests per minute for this operation has been reached.`,
    retryAfter: Math.max(1, Math.ceil(retryAfterMillis / 1000))
  })
const policyOf = (key: string) => key.slice(0, key.indexOf(":"))

/** Counting in process, without a fiber: RateLimiter.consume's fixed-window rule on the store's own count. */
const consumeNowWith = (count: CountNow) => (key: string, limit: number): Exit.Exit<Decision, RateLimited> => {
  const [taken, ttl] = count(key, 1, windowMillis / limit, limit)
  return taken > limit ? Exit.fail(limitedOf(limit, ttl)) : Exit.succeed(decisionOf(policyOf(key), limit, limit - taken, ttl))
}

/**
 * An in-process store. Effect's memory store keeps a fixed-window counter per key for ever, and with
 * one key per caller IP that is a slow leak on a public API (and, under the heap cap of `npm start`,
 * an eventual crash). This one does the same fixed-window arithmetic in its own map and drops the
 * counters whose window is over, in one sweep per window; the other algorithms are Effect's.
 */
export const makeMemoryCounterStore = Effect.gen(function*() {
  const effectStore = yield* Effect.provide(
    Effect.gen(function*() {
      return yield* RateLimiter.RateLimiterStore
    }),
    RateLimiter.layerStoreMemory
  )
  const clock = yield* Clock.clockWith(Effect.succeed)
  const counters = new Map<string, { count: number; expiresAt: number }>()
  let nextSweepAt = 0
  const sweep = (now: number) => {
    nextSweepAt = now + windowMillis
    for (const [key, counter] of counters) if (counter.expiresAt <= now) counters.delete(key)
  }
  // Each token extends the window by window/limit; a counter past its end starts again from zero.
  const countNow: CountNow = (key, tokens, refillMillis, limit) => {
    const now = clock.currentTimeMillisUnsafe()
    if (now >= nextSweepAt) sweep(now)
    let counter = counters.get(key)
    if (counter === undefined || counter.expiresAt <= now) {
      counter = { count: 0, expiresAt: now }
      counters.set(key, counter)
    }
    if (limit !== undefined && counter.count + tokens > limit) return [counter.count + tokens, counter.expiresAt - now]
    counter.count += tokens
    counter.expiresAt += refillMillis * tokens
    return [counter.count, counter.expiresAt - now]
  }
  const store = RateLimiter.RateLimiterStore.of({
    ...effectStore,
    fixedWindow: ({ key, tokens, refillRate, limit }) => Effect.sync(() => countNow(key, tokens, Duration.toMillis(refillRate), limit))
  })
  return { store, countNow, size: () => counters.size }
})

/** A fixed-window count: [count after taking `tokens` (capped at `limit`), milliseconds until the counter resets]. */
type CountNow = (key: string, tokens: number, refillMillis: number, limit: number | undefined) => readonly [number, number]

const memoryLimiter = () =>
  Effect.gen(function*() {
    const { store, countNow } = yield* makeMemoryCounterStore
    const limiter = yield* RateLimiter.make.pipe(Effect.provideService(RateLimiter.RateLimiterStore, store))
    return { limiter, countNow }
  })

/** Counts requests, in this process (memory) or for all instances (Redis). */
export class RequestCounter extends Context.Service<RequestCounter, {
  /**
   * One request counted against `key`. A count made in this process comes back as an `Exit` (an
   * Effect already done), which the edge reads without running a fiber.
   */
  readonly consume: (key: string, limit: number) => Effect.Effect<Decision, RateLimited>
}>()("app/RequestCounter") {
  static readonly layerMemory: Layer.Layer<RequestCounter> = Layer.effect(
    RequestCounter,
    Effect.map(memoryLimiter(), ({ countNow }) => RequestCounter.of({ consume: consumeNowWith(countNow) }))
  )
  /**
   * Needs `Redis` (effect/persistence). Counted in memory and reconciled with Redis in batches
   * (sharedCounter.ts: no round trip in the common case, a stated overshoot bound, memory while
   * Redis fails).
   */
  static readonly layerRedis: Layer.Layer<RequestCounter, never, AppConfig | Redis.Redis> = Layer.effect(
    RequestCounter,
    Effect.gen(function*() {
      const { redisKeyPrefix } = yield* AppConfig
      const counts = yield* makeSharedCounts({
        redis: yield* Redis.Redis,
        prefix: `${redisKeyPrefix}ratelimit:`,
        windowMillis
      })
      const exitOf = (key: string, limit: number, c: Count): Exit.Exit<Decision, RateLimited> =>
        c.allowed
          ? Exit.succeed(decisionOf(policyOf(key), limit, limit - c.used, c.resetMillis))
          : Exit.fail(limitedOf(limit, c.resetMillis))
      return RequestCounter.of({
        consume: (key, limit) => {
          const counted = counts.count(key, limit)
          return Effect.isEffect(counted) ? Effect.flatMap(counted, (c) => exitOf(key, limit, c)) : exitOf(key, limit, counted)
        }
      })
    })
  )
}
