/**
 * The stale-if-error cache in front of CoinGecko: what we keep (entries of JSON, validated when read
 * back), and the one way to fill it, `cachedOrFetch`: fresh copy → else one shared upstream fetch
 * (single-flight) → else, when the upstream failed, the long-lived "last good" copy.
 *
 * Each cached item has two entries: the fresh one (short TTL, per kind of data) and its last good copy
 * (`<key>:last-good`, kept `staleTtlHours`). Keys and their JSON shapes are shared with other
 * instances and releases through Redis: change them only together with a new key.
 */
import { Clock, Duration, Effect, Option, Schema, type Scope } from "effect"
import { CoinGeckoError } from "./CoinGeckoClient.ts"
import { RatesCache } from "./RatesCache.ts"
import { RatesConfig } from "./RatesConfig.ts"
import { makeSingleFlight } from "./SingleFlight.ts"

export interface Entry<A> {
  /** When the value was fetched from the upstream (epoch ms). */
  readonly storedAt: number
  readonly value: A
}

/** Reads back one cached entry: `{ storedAt, value }`, or nothing if it is not what we wrote. */
export type EntryDecoder<A> = (json: unknown) => Option.Option<Entry<A>>

/** Freezes a value in depth: a decoded entry is shared by every request that reads the same cached object. */
export const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const member of Object.values(value)) deepFreeze(member)
    Object.freeze(value)
  }
  return value
}

/**
 * The decoder of entries holding `value`s. Every read is validated, but once per cached object: the
 * stores hand back the same frozen object until the entry is rewritten (RatesCache), so the outcome is
 * remembered by that object's identity. Objects that are not frozen (another store) could change after
 * the check, so they are decoded each time. The decoded entry is frozen, and stays the same object
 * while the cached one does.
 */
export const entryOf = <A, I>(value: Schema.Codec<A, I>): EntryDecoder<A> => {
  const decode = Schema.decodeUnknownOption(Schema.Struct({ storedAt: Schema.Finite, value }))
  const decoded = new WeakMap<object, Option.Option<Entry<A>>>()
  return (json) => {
    if (typeof json !== "object" || json === null || !Object.isFrozen(json)) return decode(json)
    let entry = decoded.get(json)
    if (entry === undefined) {
      entry = Option.map(decode(json), deepFreeze)
      decoded.set(json, entry)
    }
    return entry
  }
}

/** A value and where it came from. */
export interface Sourced<A> extends Entry<A> {
  /** True when it is the last good copy served because the upstream failed. */
  readonly stale: boolean
}

/** The key of an entry's last good copy. */
export const lastGoodKey = (key: string) => `${key}:last-good`

export interface CachedOrFetch<A> {
  readonly key: string
  readonly entry: EntryDecoder<A>
  /** Must be lazy (built when run, e.g. `Effect.suspend`): on a hit it is never run. */
  readonly fetch: Effect.Effect<A, CoinGeckoError>
  /** Time to live of the fresh entry, given the fetched value and when it was stored. */
  readonly ttl: (value: A, now: number) => Duration.Duration
  /** Epoch ms past which this request stops waiting for the upstream. */
  readonly deadline: number
}

export interface StaleCache {
  readonly read: <A>(entry: EntryDecoder<A>, key: string) => Effect.Effect<Option.Option<Entry<A>>>
  /** Writes the fresh copy and, unless told otherwise (a null "not found" answer), the last good copy. */
  readonly write: (key: string, value: Schema.Json, storedAt: number, ttl: Duration.Duration, keepLastGood?: boolean) => Effect.Effect<void>
  /**
   * Runs upstream work once for every concurrent caller with the same `key` (keys are namespaced by
   * the callers), waiting for it no longer than `deadline`: the work itself goes on and lands in the
   * cache, so a caller that gives up wastes nothing.
   */
  readonly shared: <A>(key: string, work: Effect.Effect<A, CoinGeckoError>, deadline: number) => Effect.Effect<A, CoinGeckoError>
  /**
   * Fresh copy → else one shared upstream fetch → else (upstream failed) the last good copy.
   * A not-found answer is not an upstream failure and is never papered over with an old copy.
   */
  readonly cachedOrFetch: <A extends Schema.Json>(options: CachedOrFetch<A>) => Effect.Effect<Sourced<A>, CoinGeckoError>
}

export const makeStaleCache: Effect.Effect<StaleCache, never, RatesCache | RatesConfig | Scope.Scope> = Effect.gen(function*() {
  const config = yield* RatesConfig
  const cache = yield* RatesCache
  const flights = yield* makeSingleFlight
  const lastGoodTtl = Duration.hours(config.staleTtlHours)

  const read = <A>(entry: EntryDecoder<A>, key: string): Effect.Effect<Option.Option<Entry<A>>> =>
    Effect.map(cache.get(key), (found) => (Option.isSome(found) ? entry(found.value) : Option.none()))

  const write = (key: string, value: Schema.Json, storedAt: number, ttl: Duration.Duration, keepLastGood = true) =>
    Effect.andThen(
      cache.set(key, { storedAt, value }, ttl),
      keepLastGood ? cache.set(lastGoodKey(key), { storedAt, value }, lastGoodTtl) : Effect.void
    )

  const shared = <A>(key: string, work: Effect.Effect<A, CoinGeckoError>, deadline: number) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      flights.run(key, work).pipe(Effect.timeoutOrElse({
        duration: Duration.millis(Math.max(0, deadline - now)),
        orElse: () =>
          Effect.fail(new CoinGeckoError({ kind: "transient", detail: `no answer within the ${config.requestBudgetMs} ms budget`, retryAfterSeconds: 0 }))
      })))

  const freshFrom = <A>({ storedAt, value }: Entry<A>): Sourced<A> => ({ value, storedAt, stale: false })

  const cachedOrFetch = <A extends Schema.Json>(options: CachedOrFetch<A>): Effect.Effect<Sourced<A>, CoinGeckoError> =>
    Effect.flatMap(read(options.entry, options.key), (hit) =>
      Option.isSome(hit) ? Effect.succeed(freshFrom(hit.value)) : fillOrLastGood(options))

  /** The miss path of `cachedOrFetch`, built only on a miss. */
  const fillOrLastGood = <A extends Schema.Json>(options: CachedOrFetch<A>): Effect.Effect<Sourced<A>, CoinGeckoError> => {
    const fill = Effect.gen(function*() {
      // Another flight may have filled it between our miss and this flight starting.
      const again = yield* read(options.entry, options.key)
      if (Option.isSome(again)) return freshFrom(again.value)
      const value = deepFreeze(yield* options.fetch)
      const storedAt = yield* Clock.currentTimeMillis
      yield* write(options.key, value, storedAt, options.ttl(value, storedAt), value !== null)
      return { value, storedAt, stale: false }
    })
    return shared(options.key, fill, options.deadline).pipe(
      Effect.catchIf((error) => error.kind !== "not-found", (error) =>
        Effect.flatMap(read(options.entry, lastGoodKey(options.key)), (copy) =>
          Option.match(copy, {
            onNone: () => Effect.fail(error),
            onSome: ({ storedAt, value }) => Effect.succeed<Sourced<A>>({ value, storedAt, stale: true })
          })))
    )
  }

  return { read, write, shared, cachedOrFetch }
})
