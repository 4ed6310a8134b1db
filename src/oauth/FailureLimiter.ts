/**
 * Brute-force protection for the token endpoint (RFC 6749 §2.3.1, §10.10): failed attempts are counted
 * per key ("ip:…", "client:…") in a sliding window; a key with `limit` failures in the window is blocked
 * until the oldest of them leaves it. Behind a small interface so that a Redis implementation can replace
 * the in-memory one for multi-instance deployments.
 */
import { isIPv4, isIPv6 } from "node:net"
import { Clock, Context, Effect, Layer } from "effect"
import { OAuthConfig } from "./OAuthConfig.ts"

export type LimitStatus =
  | { readonly blocked: false }
  | { readonly blocked: true; readonly retryAfterSeconds: number }

export interface FailureLimiterShape {
  /** Failures allowed per key per window. */
  readonly limit: number
  readonly windowSeconds: number
  readonly status: (key: string) => Effect.Effect<LimitStatus>
  readonly recordFailure: (key: string) => Effect.Effect<void>
}

export class FailureLimiter extends Context.Service<FailureLimiter, FailureLimiterShape>()("app/oauth/FailureLimiter") {
  /** In memory, `OAUTH_MAX_FAILURES_PER_MIN` failures per key per 60 s. */
  static readonly layer: Layer.Layer<FailureLimiter, never, OAuthConfig> = Layer.effect(
    FailureLimiter,
    Effect.gen(function*() {
      const config = yield* OAuthConfig
      return makeMemoryFailureLimiter({ limit: config.maxFailuresPerMinute, windowSeconds: 60 })
    })
  )
  /** In memory with explicit limits; for tests. */
  static readonly layerTest = (options: { readonly limit: number; readonly windowSeconds: number; readonly maxKeys?: number }) =>
    Layer.sync(FailureLimiter, () => makeMemoryFailureLimiter(options))
}

/**
 * One array of failure times per key. Memory is bounded: each array holds at most `limit` entries and the
 * map at most `maxKeys` keys (least recently failed evicted first), so random client ids cannot grow it
 * without bound. Times come from the Effect Clock, so tests can move time.
 */
export const makeMemoryFailureLimiter = (options: {
  readonly limit: number
  readonly windowSeconds: number
  readonly maxKeys?: number
}): FailureLimiterShape => {
  const windowMs = options.windowSeconds * 1000
  const maxKeys = options.maxKeys ?? 100_000
  const failures = new Map<string, Array<number>>()

  const live = (key: string, now: number): Array<number> | undefined => {
    const times = failures.get(key)
    if (times === undefined) return undefined
    while (times.length > 0 && times[0]! <= now - windowMs) times.shift()
    if (times.length === 0) {
      failures.delete(key)
      return undefined
    }
    return times
  }

  return {
    limit: options.limit,
    windowSeconds: options.windowSeconds,
    status: (key) =>
      Effect.map(Clock.currentTimeMillis, (now): LimitStatus => {
        const times = live(key, now)
        if (times === undefined || times.length < options.limit) return { blocked: false }
        return { blocked: true, retryAfterSeconds: Math.max(1, Math.ceil((times[0]! + windowMs - now) / 1000)) }
      }),
    recordFailure: (key) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const times = live(key, now) ?? []
        times.push(now)
        if (times.length > options.limit) times.shift()
        // Re-insert so that Map order is least-recently-failed first.
        failures.delete(key)
        failures.set(key, times)
        if (failures.size > maxKeys) {
          const oldest = failures.keys().next()
          if (!oldest.done) failures.delete(oldest.value)
        }
      })
  }
}

/**
 * The rate-limit key of a client address: IPv4 as is (IPv4-mapped IPv6 unwrapped), IPv6 by its /64
 * prefix, since one host commonly holds a whole /64 and could otherwise rotate addresses freely.
 */
export const ipKey = (address: string): string => {
  const bare = address.replace(/%.*$/, "").replace(/^\[|\]$/g, "")
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)
  if (mapped !== null && isIPv4(mapped[1]!)) return `ip:${mapped[1]}`
  if (isIPv4(bare)) return `ip:${bare}`
  if (isIPv6(bare)) return `ip:${expandIPv6(bare).slice(0, 4).join(":")}::/64`
  return `ip:${bare}`
}

const expandIPv6 = (address: string): Array<string> => {
  // An embedded IPv4 tail (e.g. ::1.2.3.4) occupies the last two groups; only the first four matter here.
  const withoutV4 = address.replace(/:(\d+\.\d+\.\d+\.\d+)$/, ":0:0")
  const [head = "", tail] = withoutV4.split("::")
  const h = head === "" ? [] : head.split(":")
  const t = tail === undefined || tail === "" ? [] : tail.split(":")
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t]
  return groups.map((g) => g.toLowerCase().replace(/^0+(?=.)/, ""))
}
