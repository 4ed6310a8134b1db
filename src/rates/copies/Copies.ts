/**
 * The one way the rates capability holds copies of what its sources answer: latest prices, daily
 * series, the currency list and coin index, Coinbase's product list and prices. Each holder is a
 * `Copies` made here, over the one `CopyStore` (memory, or Redis shared by every instance), with:
 *   - fresh, due, grace and expired copies (entry.ts), each holder deciding a value's timing;
 *   - single flight: concurrent readers of a key share one fetch; a fetch serves several keys at once
 *     (one `/coins/markets` call for every cold coin), and a key already being fetched is waited for;
 *   - stale-if-error: when a fetch fails, or brings what the holder refuses (`accept`: a suspect list),
 *     the last good copy (kept `lastGoodMs`), marked stale;
 *   - negative results ("no such coin"): kept apart in the store, fresh for their time, never stale;
 *   - background refreshes of what is due, one per group, paid by nobody's request, backing off after
 *     a failure (doubling from `retryMs` up to an hour, or less while none is held if the holder says
 *     so, or the source's own Retry-After when longer);
 *   - bounded: by the store (CopyStore.ts), and pinned lists, one entry each, in this process.
 * A fetch runs in the holder's scope, not the reader's: a reader that stops waiting (its deadline)
 * wastes nothing, the copy still lands. (Effect's `Cache` interrupts a lookup that every waiter
 * abandoned, which would throw away a call already paid for; hence flights of our own.)
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Option, Schema, type Scope } from "effect"
import { Charge, SourceError } from "../upstream.ts"
import { CopyStore } from "./CopyStore.ts"
import { deepFreeze } from "../../platform/deepFreeze.ts"
import type { Copies, CopiesOptions, Entry, Served, Timing } from "./entry.ts"

export type { Copies } from "./entry.ts"

const MAX_BACKOFF_MS = 3_600_000
/** How long one instance may load a shared list before another may (its calls take seconds each). */
const LIST_LEASE_MS = 60_000
const LEASE_POLL_MS = 250
/** Groups remembered as backing off, at most (then forgotten all at once). */
const BACKOFF_CAPACITY = 10_000

type Flight<A> = Deferred.Deferred<ReadonlyMap<string, Entry<A>>, SourceError>

// The encoded side of a value is whatever its schema reads (`any` lets callers name only K and A).
export const makeCopies = <K, A, I = any>(options: CopiesOptions<K, A, I>): Effect.Effect<Copies<K, A>, never, CopyStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* CopyStore
    const scope = yield* Effect.scope
    const { keyOf } = options
    const isNegative = options.isNegative ?? (() => false)
    const groupOf = (key: K) => options.refreshGroup?.of(key) ?? keyOf(key)
    const spread = Math.random() * (options.refreshSpreadMs ?? 0)
    const flights = new Map<string, Flight<A>>()
    const refreshing = new Set<string>()
    const backoff = new Map<string, { readonly until: number; readonly failures: number }>()
    const pinned = new Map<string, Entry<A>>()
    const decode = entryDecoder(options.value)

    const read = (key: K): Effect.Effect<Option.Option<Entry<A>>> => {
      const storeKey = keyOf(key)
      const local = options.pinned === true ? pinned.get(storeKey) : undefined
      if (options.pinned === true && !store.shared) return Effect.succeed(Option.fromUndefinedOr(local))
      return Effect.map(store.get(storeKey), (found) => {
        const stored = Option.flatMap(found, decode)
        if (local === undefined) return stored
        // Another instance's newer copy is adopted.
        if (Option.isSome(stored) && stored.value.storedAt > local.storedAt) {
          pinned.set(storeKey, stored.value)
          return stored
        }
        return Option.some(local)
      })
    }

    const write = (key: K, entry: Entry<A>) => {
      const storeKey = keyOf(key)
      if (options.pinned === true) {
        pinned.set(storeKey, entry)
        if (!store.shared) return Effect.void
      }
      const negative = isNegative(entry.value)
      const keepFor = negative ? entry.freshUntil - entry.storedAt : Math.max(entry.graceUntil - entry.storedAt, options.lastGoodMs)
      return store.set(storeKey, entry as unknown as Schema.Json, Duration.millis(keepFor), { negative })
    }

    /** The copies of `keys` fresh now, when every one of them is; else none. */
    const allFresh = (keys: ReadonlyArray<K>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const out = new Map<string, Entry<A>>()
        for (const key of keys) {
          const held = yield* read(key)
          if (Option.isSome(held) && freshnessOf(held.value, now) === "fresh") out.set(keyOf(key), held.value)
        }
        return out.size === keys.length ? out : undefined
      })

    /**
     * A key shared through the store (a list; `loadLeaseMs`) is loaded by one instance at a time: the
     * others wait for its copy (until the lease ends), then load it themselves only if none came.
     */
    const leaseMs = options.loadLeaseMs ?? (options.pinned === true ? LIST_LEASE_MS : undefined)
    const waitForSharedLoad = (keys: ReadonlyArray<K>) =>
      Effect.gen(function*() {
        if (leaseMs === undefined || store.claim === undefined) return { lease: undefined, copies: undefined }
        const lease = `${keyOf(keys[0]!)}:loading`
        if (yield* store.claim(lease, Duration.millis(leaseMs))) return { lease, copies: undefined }
        for (let waited = 0; waited < leaseMs; waited += LEASE_POLL_MS) {
          yield* Effect.sleep(Duration.millis(LEASE_POLL_MS))
          const loaded = yield* allFresh(keys)
          if (loaded !== undefined) return { lease: undefined, copies: loaded }
        }
        return { lease: undefined, copies: undefined }
      })

    /** Fetches and stores; skipped when every key is fresh again (another instance or flight filled them). */
    const fetchAndStore = (keys: ReadonlyArray<K>, charge: Charge) =>
      Effect.gen(function*() {
        const held = yield* allFresh(keys)
        if (held !== undefined) return held
        const shared = yield* waitForSharedLoad(keys)
        if (shared.copies !== undefined) return shared.copies
        const out = new Map<string, Entry<A>>()
        const fetched = (yield* options.fetch(keys, charge).pipe(
          Effect.ensuring(shared.lease === undefined || store.release === undefined ? Effect.void : store.release(shared.lease))
        )).map(([key, raw]) => [key, deepFreeze(raw)] as const)
        for (const [key, value] of fetched) {
          if (options.accept === undefined) break
          const held = yield* read(key)
          const verdict = options.accept(value, Option.isSome(held) ? held.value.value : undefined)
          if (verdict === true) continue
          return yield* Effect.fail(new SourceError({ source: options.source, kind: "invalid-response", detail: `${options.name} refused: ${verdict}`, retryAfterSeconds: 0 }))
        }
        const storedAt = yield* Clock.currentTimeMillis
        for (const [key, value] of fetched) {
          const entry = entryAt(value, storedAt, options.timing(value, storedAt, key))
          yield* write(key, entry)
          out.set(keyOf(key), entry)
        }
        return out
      })

    const backingOff = (group: string, now: number) => (backoff.get(group)?.until ?? 0) > now

    const noteFailure = (group: string, error: SourceError, hadCopy: boolean) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const failures = (backoff.get(group)?.failures ?? 0) + 1
        // A refusal that says when to come back (the month's pace, a 429) is taken at its word.
        const longest = hadCopy ? MAX_BACKOFF_MS : Math.min(MAX_BACKOFF_MS, options.retryMaxMsWhileNoneHeld ?? MAX_BACKOFF_MS)
        const waitMs = Math.max(Math.min(longest, options.retryMs * 2 ** (failures - 1)), error.retryAfterSeconds * 1000)
        if (backoff.size >= BACKOFF_CAPACITY) backoff.clear()
        backoff.set(group, { until: at + waitMs, failures })
        const line = `rates: ${options.name} unavailable; ${hadCopy ? "serving the last good copy" : "none held yet"}, next try in ${Math.round(waitMs / 1000)} s`
        return options.warnOnFailure === true ? Effect.logWarning(line, error.message) : Effect.logDebug(line, error.message)
      })

    /**
     * Starts one fetch of `keys`, registered as their flight, in the holder's scope. A background fetch
     * is refused while its group backs off after a failure.
     */
    const startFlight = (keys: ReadonlyArray<K>, charge: Charge, onDone?: () => void) =>
      Effect.gen(function*() {
        const deferred = Deferred.makeUnsafe<ReadonlyMap<string, Entry<A>>, SourceError>()
        const storeKeys = keys.map(keyOf)
        // Registered synchronously, before any yield, so a reader in the same tick finds it.
        for (const storeKey of storeKeys) flights.set(storeKey, deferred)
        const group = groupOf(keys[0]!)
        const work = fetchAndStore(keys, charge).pipe(
          Effect.tap(() => Effect.sync(() => backoff.delete(group))),
          Effect.tapError((error) =>
            charge._tag === "Background"
              ? Effect.flatMap(Effect.forEach(keys, read), (held) => noteFailure(group, error, held.some(Option.isSome)))
              : Effect.void
          ),
          // Unregistered before the waiters wake: a reader arriving after this flight must start a new
          // one, never be handed this (possibly failed) result.
          Effect.onExit((exit) =>
            Effect.suspend(() => {
              for (const storeKey of storeKeys) if (flights.get(storeKey) === deferred) flights.delete(storeKey)
              onDone?.()
              return Deferred.done(deferred, exit)
            })
          )
        )
        yield* Effect.forkIn(work, scope, { startImmediately: true })
        return deferred
      })

    /** One background refresh of the group of `key`, unless one runs or it backs off; returns at once. */
    const refresh = (key: K, now: number) =>
      Effect.suspend(() => {
        const group = groupOf(key)
        if (refreshing.has(group) || backingOff(group, now)) return Effect.void
        const along = options.refreshGroup?.keys(key, now) ?? []
        // Keys being fetched already are not fetched twice.
        const keys = (along.some((k) => keyOf(k) === keyOf(key)) ? along : [key, ...along]).filter((k) => !flights.has(keyOf(k)))
        if (keys.length === 0) return Effect.void
        refreshing.add(group)
        return Effect.asVoid(startFlight(keys, Charge.background, () => refreshing.delete(group)))
      })

    /** The flight each of `keys` waits for: one running, else one started (one for all, or one each). */
    const flightsFor = (keys: ReadonlyArray<K>, charge: Charge, now: number) =>
      Effect.gen(function*() {
        const waits = new Map<K, Flight<A>>()
        const toFetch: Array<K> = []
        for (const key of keys) {
          const running = flights.get(keyOf(key))
          if (running !== undefined) waits.set(key, running)
          else toFetch.push(key)
        }
        const batches = options.batched === true ? (toFetch.length === 0 ? [] : [toFetch]) : toFetch.map((key) => [key])
        for (const batch of batches) {
          const group = groupOf(batch[0]!)
          if (charge._tag === "Background" && backingOff(group, now)) {
            const refused = Deferred.makeUnsafe<ReadonlyMap<string, Entry<A>>, SourceError>()
            Deferred.doneUnsafe(refused, Exit.fail(new SourceError({
              source: options.source,
              kind: "unavailable",
              detail: `the ${options.name} is not held and cannot be loaded now`,
              retryAfterSeconds: Math.ceil((backoff.get(group)!.until - now) / 1000)
            })))
            for (const key of batch) waits.set(key, refused)
            continue
          }
          const flight = yield* startFlight(batch, charge)
          for (const key of batch) waits.set(key, flight)
        }
        return waits
      })

    /** Waits for the flights of `keys` (joining those running), until `deadline`: the entries, or why not. */
    const fill = (keys: ReadonlyArray<K>, charge: Charge, deadline: number) =>
      Effect.gen(function*() {
        const waits = yield* flightsFor(keys, charge, yield* Clock.currentTimeMillis)
        const timedOut = Effect.fail(
          new SourceError({ source: options.source, kind: "transient", detail: "no answer within the request's budget", retryAfterSeconds: 0 })
        )
        const outcomes = new Map<Flight<A>, Exit.Exit<ReadonlyMap<string, Entry<A>>, SourceError>>()
        for (const flight of new Set(waits.values())) {
          const remaining = Math.max(0, deadline - (yield* Clock.currentTimeMillis))
          outcomes.set(flight, yield* Effect.exit(Effect.timeoutOrElse(Deferred.await(flight), { duration: Duration.millis(remaining), orElse: () => timedOut })))
        }
        const entries = new Map<K, Entry<A>>()
        const failures = new Map<K, SourceError>()
        for (const [key, flight] of waits) {
          const exit = outcomes.get(flight)!
          if (Exit.isSuccess(exit)) {
            const entry = exit.value.get(keyOf(key))
            if (entry !== undefined) entries.set(key, entry)
            else failures.set(key, new SourceError({ source: options.source, kind: "invalid-response", detail: `no ${options.name} for ${keyOf(key)}`, retryAfterSeconds: 0 }))
          } else {
            const error = Cause.findErrorOption(exit.cause)
            if (Option.isSome(error)) failures.set(key, error.value)
            else return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
          }
        }
        return { entries, failures }
      })

    const getAll = (keys: ReadonlyArray<K>, charge: Charge, deadline: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const out = new Map<K, Served<A>>()
        const cold: Array<K> = []
        const due: Array<K> = []
        const copies = new Map<K, Entry<A>>()
        for (const key of keys) {
          if (out.has(key) || cold.includes(key)) continue
          const hit = yield* read(key)
          if (Option.isNone(hit)) {
            cold.push(key)
            continue
          }
          const freshness = freshnessOf(hit.value, now - spread)
          if (freshness === "expired") {
            cold.push(key)
            copies.set(key, hit.value)
            continue
          }
          out.set(key, served(hit.value, freshnessOf(hit.value, now)))
          if (freshness !== "fresh") due.push(key)
        }
        // After every key is read: an answer is made of one generation of copies.
        for (const key of due) yield* refresh(key, now)
        if (cold.length === 0) return { served: out, failures: new Map<K, SourceError>(), failure: undefined }
        const { entries, failures } = yield* fill(cold, charge, deadline)
        const at = yield* Clock.currentTimeMillis
        for (const key of cold) {
          const entry = entries.get(key)
          if (entry !== undefined) {
            out.set(key, served(entry, freshnessOf(entry, at)))
            continue
          }
          // A not-found answer is not a failure of the source, and is never papered over with an old copy.
          const copy = copies.get(key)
          if (copy !== undefined && options.lastGoodMs > 0 && !isNegative(copy.value) && failures.get(key)?.kind !== "not-found") out.set(key, lastGood(copy))
        }
        return { served: out, failures, failure: failures.values().next().value }
      })

    const get = (key: K, charge: Charge, deadline: number) =>
      Effect.flatMap(getAll([key], charge, deadline), ({ failure, served }) => {
        const found = served.get(key)
        return found !== undefined ? Effect.succeed(found) : Effect.fail(failure!)
      })

    const warm = (key: K) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const held = yield* read(key)
        if (Option.isSome(held) && freshnessOf(held.value, now - spread) === "fresh") return
        yield* refresh(key, now)
        const flight = flights.get(keyOf(key))
        if (flight !== undefined) yield* Effect.exit(Deferred.await(flight))
      })

    const retryAfterSeconds = (key: K) =>
      Effect.map(Clock.currentTimeMillis, (now) => Math.max(1, Math.ceil(((backoff.get(groupOf(key))?.until ?? now) - now) / 1000)))

    return { get, getAll, warm, retryAfterSeconds }
  })

// ---------------------------------------------------------------------------------------------------
// A copy's lifecycle (entry.ts has its shape)

const entryAt = <A>(value: A, storedAt: number, timing: Timing): Entry<A> => {
  const freshUntil = storedAt + Duration.toMillis(timing.ttl)
  return {
    storedAt,
    refreshAt: freshUntil - Duration.toMillis(timing.refreshAhead),
    freshUntil,
    graceUntil: freshUntil + Duration.toMillis(timing.grace),
    value
  }
}

type Freshness = "fresh" | "due" | "grace" | "expired"

const freshnessOf = (entry: Entry<unknown>, now: number): Freshness =>
  now < entry.refreshAt ? "fresh" : now < entry.freshUntil ? "due" : now < entry.graceUntil ? "grace" : "expired"

/** The copy as served now, when it is not expired. */
const served = <A>(entry: Entry<A>, freshness: Freshness): Served<A> => ({
  value: entry.value,
  storedAt: entry.storedAt,
  stale: false,
  holdsUntil: freshness === "fresh" ? entry.refreshAt : freshness === "due" ? entry.freshUntil : 0
})

/** A last good copy, served because the source failed. */
const lastGood = <A>(entry: Entry<A>): Served<A> => ({ value: entry.value, storedAt: entry.storedAt, stale: true, holdsUntil: 0 })

/**
 * Reads back stored entries holding values of `value`. Every read is validated, but once per stored
 * object: the stores hand back the same frozen object until the entry is rewritten (CopyStore.ts), so
 * the outcome is remembered by that object's identity. Objects that are not frozen (a test's store)
 * could change after the check, so they are decoded each time.
 */
const entryDecoder = <A, I>(value: Schema.Codec<A, I>): (json: unknown) => Option.Option<Entry<A>> => {
  const decode = Schema.decodeUnknownOption(Schema.Struct({
    storedAt: Schema.Finite,
    refreshAt: Schema.Finite,
    freshUntil: Schema.Finite,
    graceUntil: Schema.Finite,
    value
  }))
  const decoded = new WeakMap<object, Option.Option<Entry<A>>>()
  return (json) => {
    if (typeof json !== "object" || json === null || !Object.isFrozen(json)) return decode(json) as Option.Option<Entry<A>>
    let entry = decoded.get(json)
    if (entry === undefined) {
      entry = Option.map(decode(json) as Option.Option<Entry<A>>, deepFreeze)
      decoded.set(json, entry)
    }
    return entry
  }
}
