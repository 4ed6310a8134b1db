/**
 * The cache in front of CoinGecko's data calls: what we keep (entries of JSON, validated when read back),
 * how long each copy serves, and the ways to fill it.
 *
 * One entry per item, `{ storedAt, refreshAt, freshUntil, graceUntil, value }`, kept `staleTtlHours` as
 * its last good copy (negative answers only while fresh, in the store's negative tier). Read at `now`:
 *   - before `refreshAt`: fresh; an answer made of it may be repeated until then;
 *   - before `freshUntil`: fresh, and a read starts one background refresh (what callers keep asking
 *     for is refreshed ahead of expiry and never goes cold);
 *   - before `graceUntil`: served as is while one background refresh runs: callers never wait on one;
 *   - after: a cold fetch the request waits for (charged to its caller, upstreamGuards.ts), and if the
 *     upstream fails, this copy again, marked stale.
 * Keys and their JSON shapes are shared with other instances and releases through Redis: change them
 * only together with a new key (`rates:v2:`).
 */
import { Clock, Duration, Effect, Option, Schema, type Scope } from "effect"
import { CoinGeckoError } from "./coinGeckoResponses.ts"
import { RatesCache } from "./RatesCache.ts"
import { RatesConfig } from "./RatesConfig.ts"
import { makeSingleFlight } from "./SingleFlight.ts"
import { CurrentCharge } from "./upstreamGuards.ts"

export interface Entry<A> {
  /** When the value was fetched from the upstream (epoch ms). */
  readonly storedAt: number
  readonly refreshAt: number
  readonly freshUntil: number
  readonly graceUntil: number
  readonly value: A
}

/** Reads back one cached entry, or nothing if it is not what we wrote. */
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
 * the check, so they are decoded each time.
 */
export const entryOf = <A, I>(value: Schema.Codec<A, I>): EntryDecoder<A> => {
  const decode = Schema.decodeUnknownOption(Schema.Struct({
    storedAt: Schema.Finite,
    refreshAt: Schema.Finite,
    freshUntil: Schema.Finite,
    graceUntil: Schema.Finite,
    value
  }))
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

/** How long a value serves, decided when it is stored. */
export interface Timing {
  readonly ttl: Duration.Duration
  /** How long before expiry a read starts a refresh (zero: none before expiry). */
  readonly refreshAhead: Duration.Duration
  /** How long after expiry it is still served while a refresh runs. */
  readonly grace: Duration.Duration
}

/** A value and where it came from. */
export interface Sourced<A> {
  readonly value: A
  readonly storedAt: number
  /** True when it is the last good copy served because the upstream failed. */
  readonly stale: boolean
  /** Until when an answer made of it may be repeated without reading it again; 0: not at all. */
  readonly holdsUntil: number
}

export type Freshness = "fresh" | "due" | "grace" | "expired"

export const freshnessOf = (entry: Entry<unknown>, now: number): Freshness =>
  now < entry.refreshAt ? "fresh" : now < entry.freshUntil ? "due" : now < entry.graceUntil ? "grace" : "expired"

/** The entry as served now, when it is not expired. */
export const served = <A>(entry: Entry<A>, freshness: Freshness): Sourced<A> => ({
  value: entry.value,
  storedAt: entry.storedAt,
  stale: false,
  holdsUntil: freshness === "fresh" ? entry.refreshAt : freshness === "due" ? entry.freshUntil : 0
})

/** A last good copy, served because the upstream failed. */
export const lastGood = <A>(entry: Entry<A>): Sourced<A> => ({ value: entry.value, storedAt: entry.storedAt, stale: true, holdsUntil: 0 })

export interface CachedOrFetch<A> {
  readonly key: string
  readonly entry: EntryDecoder<A>
  /** Must be lazy (built when run, e.g. `Effect.suspend`): on a hit it is never run. */
  readonly fetch: Effect.Effect<A, CoinGeckoError>
  readonly timing: (value: A, storedAt: number) => Timing
  /** Epoch ms past which this request stops waiting for the upstream. */
  readonly deadline: number
}

export interface StaleCache {
  readonly read: <A>(entry: EntryDecoder<A>, key: string) => Effect.Effect<Option.Option<Entry<A>>>
  /** Stores a value fetched at `storedAt`; null is a negative answer (its own tier, never a last good copy). */
  readonly write: (key: string, value: Schema.Json, storedAt: number, timing: Timing) => Effect.Effect<Entry<Schema.Json>>
  /**
   * Runs upstream work once for every concurrent caller with the same `key`, waiting for it no longer
   * than `deadline`: the work itself goes on and lands in the cache, so a caller that gives up wastes nothing.
   */
  readonly shared: <A>(key: string, work: Effect.Effect<A, CoinGeckoError>, deadline: number) => Effect.Effect<A, CoinGeckoError>
  /**
   * Starts one background refresh of the `items` not already being refreshed and not backing off
   * after a failed refresh, charged to no caller, and returns at once.
   */
  readonly refresh: <I>(items: ReadonlyArray<I>, keyOf: (item: I) => string, work: (claimed: ReadonlyArray<I>) => Effect.Effect<void, CoinGeckoError>) => Effect.Effect<void>
  /** Held copy (refreshed behind when due) → else one shared cold fetch → else the last good copy. */
  readonly cachedOrFetch: <A extends Schema.Json>(options: CachedOrFetch<A>) => Effect.Effect<Sourced<A>, CoinGeckoError>
}

/** Failed refreshes remembered at most (keys, then forgotten all at once). */
const BACKOFF_CAPACITY = 10_000

export const makeStaleCache: Effect.Effect<StaleCache, never, RatesCache | RatesConfig | Scope.Scope> = Effect.gen(function*() {
  const config = yield* RatesConfig
  const cache = yield* RatesCache
  const scope = yield* Effect.scope
  const flights = yield* makeSingleFlight
  const lastGoodMs = Duration.toMillis(Duration.hours(config.staleTtlHours))
  const refreshing = new Set<string>()
  const backoffUntil = new Map<string, number>()

  const read = <A>(entry: EntryDecoder<A>, key: string): Effect.Effect<Option.Option<Entry<A>>> =>
    Effect.map(cache.get(key), (found) => (Option.isSome(found) ? entry(found.value) : Option.none()))

  const write = (key: string, value: Schema.Json, storedAt: number, timing: Timing) => {
    const freshUntil = storedAt + Duration.toMillis(timing.ttl)
    const entry: Entry<Schema.Json> = {
      storedAt,
      refreshAt: freshUntil - Duration.toMillis(timing.refreshAhead),
      freshUntil,
      graceUntil: freshUntil + Duration.toMillis(timing.grace),
      value
    }
    const negative = value === null
    const keepFor = negative ? freshUntil - storedAt : Math.max(entry.graceUntil - storedAt, lastGoodMs)
    return Effect.as(cache.set(key, entry as unknown as Schema.Json, Duration.millis(keepFor), { negative }), entry)
  }

  const shared = <A>(key: string, work: Effect.Effect<A, CoinGeckoError>, deadline: number) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      flights.run(key, work).pipe(Effect.timeoutOrElse({
        duration: Duration.millis(Math.max(0, deadline - now)),
        orElse: () =>
          Effect.fail(new CoinGeckoError({ kind: "transient", detail: `no answer within the ${config.requestBudgetMs} ms budget`, retryAfterSeconds: 0 }))
      })))

  const refresh = <I>(items: ReadonlyArray<I>, keyOf: (item: I) => string, work: (claimed: ReadonlyArray<I>) => Effect.Effect<void, CoinGeckoError>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const claimed = items.filter((item) => {
        const key = keyOf(item)
        return !refreshing.has(key) && !((backoffUntil.get(key) ?? 0) > now)
      })
      if (claimed.length === 0) return Effect.void
      const keys = claimed.map(keyOf)
      for (const key of keys) refreshing.add(key)
      const background = work(claimed).pipe(
        Effect.tapError((error) =>
          Effect.flatMap(Clock.currentTimeMillis, (failedAt) => {
            if (backoffUntil.size >= BACKOFF_CAPACITY) backoffUntil.clear()
            // A refusal that says when to come back (the month's pace, a 429) is taken at its word.
            const until = failedAt + Math.max(config.auxiliaryRetryMs, error.retryAfterSeconds * 1000)
            for (const key of keys) backoffUntil.set(key, until)
            return Effect.logDebug("rates: background refresh failed; the held copies serve meanwhile", error.message)
          })),
        Effect.ignore,
        Effect.ensuring(Effect.sync(() => {
          for (const key of keys) refreshing.delete(key)
        })),
        // Nobody's request: no caller's share, and its failure is its own in the breaker.
        Effect.provideService(CurrentCharge, undefined)
      )
      return Effect.asVoid(Effect.forkIn(background, scope, { startImmediately: true }))
    })

  /** Fetches and stores; another flight may have filled the entry meanwhile. */
  const fill = <A extends Schema.Json>(options: CachedOrFetch<A>): Effect.Effect<Sourced<A>, CoinGeckoError> =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const again = yield* read(options.entry, options.key)
      if (Option.isSome(again) && freshnessOf(again.value, now) === "fresh") return served(again.value, "fresh")
      const value = deepFreeze(yield* options.fetch)
      const storedAt = yield* Clock.currentTimeMillis
      const entry = yield* write(options.key, value, storedAt, options.timing(value, storedAt))
      return served(entry as Entry<A>, freshnessOf(entry, storedAt))
    })

  const cachedOrFetch = <A extends Schema.Json>(options: CachedOrFetch<A>): Effect.Effect<Sourced<A>, CoinGeckoError> =>
    Effect.gen(function*() {
      const hit = yield* read(options.entry, options.key)
      const now = yield* Clock.currentTimeMillis
      if (Option.isSome(hit)) {
        const freshness = freshnessOf(hit.value, now)
        if (freshness === "fresh") return served(hit.value, freshness)
        if (freshness !== "expired") {
          yield* refresh([options.key], (key) => key, () => Effect.asVoid(fill(options)))
          return served(hit.value, freshness)
        }
      }
      return yield* shared(options.key, fill(options), options.deadline).pipe(
        // A not-found answer is not an upstream failure and is never papered over with an old copy.
        Effect.catchIf((error) => error.kind !== "not-found" && Option.isSome(hit), () => Effect.succeed(lastGood(Option.getOrThrow(hit))))
      )
    })

  return { read, write, shared, refresh, cachedOrFetch }
})
