/**
 * Key/value store for upstream rates data.
 *
 * The interface is deliberately what a Redis implementation can offer (CONTRACT C2: REDIS_URL shares the
 * rates cache between instances): string keys, JSON values, a time-to-live per entry. Readers must
 * validate what they get back (another instance or an older release may have written it).
 *
 * Failures of the store are not the caller's problem: an implementation reports a broken store as a
 * miss on `get` and ignores it on `set`, so an outage of the cache never fails a request.
 */
import { Clock, Context, Duration, Effect, Layer, Option, type Schema } from "effect"
import { recordCacheLookup } from "../http/metrics.ts"
import { Redis } from "effect/persistence"

export interface RatesCacheShape {
  readonly get: (key: string) => Effect.Effect<Option.Option<Schema.Json>>
  readonly set: (key: string, value: Schema.Json, timeToLive: Duration.Duration) => Effect.Effect<void>
}

export class RatesCache extends Context.Service<RatesCache, RatesCacheShape>()("app/RatesCache") {
  /** Process-local store; bounded so a flood of distinct keys cannot exhaust memory. */
  static readonly layerMemory = (options?: { readonly capacity?: number }) =>
    Layer.sync(RatesCache, () => metered(makeMemoryStore(options?.capacity ?? 10_000)))

  /**
   * Shared between instances through Redis (REDIS_URL). Keys get `prefix`; entries expire in Redis
   * (`SET … PX`). A slow or absent Redis costs at most `timeoutMs` per operation, then counts as a miss.
   */
  static readonly layerRedis = (options?: { readonly prefix?: string; readonly timeoutMs?: number }) =>
    Layer.effect(RatesCache, Effect.map(Effect.service(Redis.Redis), (redis) => metered(makeRedisStore(redis, options?.prefix ?? "", options?.timeoutMs ?? 250))))
}

/** Kind of entry for metrics, a closed set: `rates:cg:chart:bitcoin:usd:30` → `chart`. */
const kindOf = (key: string) => `${key.split(":")[2] ?? "other"}${key.endsWith(":last-good") ? "-last-good" : ""}`

/** Counts hits and misses per kind of entry for /metrics. */
const metered = (store: RatesCacheShape): RatesCacheShape => ({
  get: (key) => Effect.tap(store.get(key), (found) => Effect.sync(() => recordCacheLookup(kindOf(key), Option.isSome(found)))),
  set: store.set
})

interface MemoryEntry {
  /** Stored serialised, like Redis would, so a value that is not plain JSON fails here and not in production. */
  readonly json: string
  readonly expiresAt: number
}

const makeMemoryStore = (capacity: number): RatesCacheShape => {
  // A Map iterates in insertion order, and `set` re-inserts, so the first key is the least recently written.
  const entries = new Map<string, MemoryEntry>()
  return RatesCache.of({
    get: (key) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = entries.get(key)
        if (entry === undefined) return Option.none()
        if (entry.expiresAt <= now) {
          entries.delete(key)
          return Option.none()
        }
        return Option.some(JSON.parse(entry.json) as Schema.Json)
      }),
    set: (key, value, timeToLive) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const ttl = Duration.toMillis(timeToLive)
        entries.delete(key)
        if (!(ttl > 0)) return
        entries.set(key, { json: JSON.stringify(value), expiresAt: now + ttl })
        while (entries.size > capacity) {
          const oldest = entries.keys().next()
          if (oldest.done === true) break
          entries.delete(oldest.value)
        }
      })
  })
}

const makeRedisStore = (redis: Redis.Redis["Service"], prefix: string, timeoutMs: number): RatesCacheShape => {
  const bounded = <A>(what: string, effect: Effect.Effect<A, Redis.RedisError>, fallback: A) =>
    effect.pipe(
      Effect.timeoutOrElse({ duration: Duration.millis(timeoutMs), orElse: () => Effect.fail(`no answer within ${timeoutMs} ms`) }),
      Effect.catch((error) => Effect.as(Effect.logWarning(`rates cache: Redis ${what} failed; carrying on without it`, String(error)), fallback))
    )
  return RatesCache.of({
    get: (key) =>
      bounded(
        "GET",
        Effect.map(redis.send<string | null>("GET", `${prefix}${key}`), (text) => {
          if (typeof text !== "string") return Option.none()
          try {
            return Option.some(JSON.parse(text) as Schema.Json)
          } catch {
            return Option.none() // not ours or corrupted: a miss, and the next write replaces it
          }
        }),
        Option.none()
      ),
    set: (key, value, timeToLive) => {
      const ttl = Math.ceil(Duration.toMillis(timeToLive))
      if (!(ttl > 0)) return Effect.void
      return bounded("SET", Effect.asVoid(redis.send("SET", `${prefix}${key}`, JSON.stringify(value), "PX", String(ttl))), undefined)
    }
  })
}
