/**
 * The one way the rates capability holds copies of its sources' answers (entry.ts), over the one `CopyStore`. Per-request
 * copies (`makeCopies`): single flight, stale-if-error, negative answers apart, background refreshes with backoff; a fetch
 * runs in the holder's scope, so a reader that stops waiting wastes no paid call (Effect's `Cache` would). The lists
 * (`makeHeldList`) are held apart, one value each; both share a copy's lifecycle (below).
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Option, Schedule, Schema, type Scope } from "effect"
import { Charge, type SourceError, sourceError, Spend, spendingUntil } from "../upstream.ts"
import { UNANSWERED_CLAIMS_ALONE } from "../redisDown.ts"
import { CopyStore, type CopyWrite, underLease } from "./CopyStore.ts"
import { deepFreeze } from "../../platform/deepFreeze.ts"
import type { Copies, CopiesOptions, Entry, HeldList, HeldListOptions, Served, Timing } from "./entry.ts"

export type { Copies } from "./entry.ts"

const MAX_BACKOFF_MS = 3_600_000
/** Groups remembered as backing off, at most (then forgotten all at once). */
const BACKOFF_CAPACITY = 10_000
type Flight<A> = Deferred.Deferred<ReadonlyMap<string, Entry<A>>, SourceError>

// The encoded side of a value is whatever its schema reads (`any` lets callers name only A).
export const makeCopies = <A, I = any>(options: CopiesOptions<A, I>): Effect.Effect<Copies<A>, never, CopyStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* CopyStore
    const scope = yield* Effect.scope
    const groupOf = (key: string) => options.fetchedTogether?.groupOf(key) ?? key
    const flights = new Map<string, Flight<A>>()
    const refreshing = new Set<string>()
    const backoff = new Map<string, { readonly until: number; readonly failures: number }>()
    // Counts this holder's writes: in a store no other instance writes, an unchanged count means no re-read.
    let generation = 0
    const decode = entryDecoder(options.value)
    // One store operation per read or write of many copies (a test's store may have only get and set).
    const getMany = store.getMany ?? ((keys: ReadonlyArray<string>) => Effect.forEach(keys, store.get))
    const setMany = store.setMany ??
      ((writes: ReadonlyArray<CopyWrite>) => Effect.forEach(writes, (w) => store.set(w.key, w.value, w.timeToLive, { negative: w.negative }), { discard: true }))

    /** The copies held under `keys` (undefined: none), in one read of the store. */
    const readAll = (keys: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<Entry<A> | undefined>> =>
      Effect.map(getMany(keys), (found) => found.map((json) => Option.getOrUndefined(Option.flatMap(json, decode))))

    /** Stores `entries`, in one write of the store; TTLs are decided here. */
    const writeAll = (entries: ReadonlyMap<string, Entry<A>>) => {
      generation++
      const writes: Array<CopyWrite> = []
      for (const [key, entry] of entries) {
        const negative = entry.value === null
        const keepFor = negative ? entry.freshUntil - entry.storedAt : Math.max(entry.graceUntil - entry.storedAt, options.onFailure.lastGoodMs)
        writes.push({ key, value: entry as unknown as Schema.Json, timeToLive: Duration.millis(keepFor), negative })
      }
      return writes.length === 0 ? Effect.void : setMany(writes)
    }

    /** The copies of `keys` fresh now, when every one of them is; else none. */
    const allFresh = (keys: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const held = yield* readAll(keys)
        const out = new Map<string, Entry<A>>()
        for (let i = 0; i < keys.length; i++) {
          const entry = held[i]
          if (entry !== undefined && freshnessOf(entry, now) === "fresh") out.set(keys[i]!, entry)
        }
        return out.size === keys.length ? out : undefined
      })

    /** Fetches and stores, unless all are fresh again; `seen`: the `generation` at which the caller found them not. */
    const fetchAndStore = (keys: ReadonlyArray<string>, charge: Charge, seen: number | undefined) =>
      Effect.gen(function*() {
        const held = seen === generation && !store.shared ? undefined : yield* allFresh(keys)
        if (held !== undefined) return held
        const leaseMs = options.loadLeaseMs
        return yield* (leaseMs === undefined ? fetchThenStore(keys, charge) : underLease(store, keys[0]!, leaseMs, UNANSWERED_CLAIMS_ALONE.copy, allFresh(keys), fetchThenStore(keys, charge)))
      })
    const fetchThenStore = (keys: ReadonlyArray<string>, charge: Charge) =>
      Effect.gen(function*() {
        // Paid by whoever started the flight; it is not bound by any reader's deadline (the copy lands for the next).
        const answered = yield* options.fetch(keys).pipe(spendingUntil(Number.POSITIVE_INFINITY, charge))
        const storedAt = yield* Clock.currentTimeMillis
        // Plain loops: the holder's callbacks run one after another, not interleaved with ours; values frozen in place.
        const timings: Array<Timing> = []
        for (const [key, raw] of answered) timings.push(options.timing(deepFreeze(raw), storedAt, key))
        const out = new Map<string, Entry<A>>()
        for (let i = 0; i < answered.length; i++) out.set(answered[i]![0], entryOf(answered[i]![1], storedAt, timings[i]!))
        yield* writeAll(out)
        return out
      })

    const backingOff = (group: string, now: number) => (backoff.get(group)?.until ?? 0) > now
    const noteFailure = (group: string, error: SourceError, hadCopy: boolean) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const failures = (backoff.get(group)?.failures ?? 0) + 1
        const waitMs = retryWaitMs(failures, options.onFailure.retryMs, MAX_BACKOFF_MS, error)
        if (backoff.size >= BACKOFF_CAPACITY) backoff.clear()
        backoff.set(group, { until: at + waitMs, failures })
        return Effect.logDebug(failureLine(options.name, hadCopy, waitMs), error.message)
      })

    /** Starts one fetch of `keys` as their flight, in the holder's scope; its group is asked only on backoff. */
    // Uninterruptible: a flight registered is a flight forked, or its readers would wait for it in vain.
    const startFlight = (keys: ReadonlyArray<string>, charge: Charge, seen?: number, onDone?: () => void) =>
      Effect.uninterruptible(Effect.gen(function*() {
        const deferred = Deferred.makeUnsafe<ReadonlyMap<string, Entry<A>>, SourceError>()
        // Registered synchronously, before any yield, so a reader in the same tick finds it.
        for (const key of keys) flights.set(key, deferred)
        const work = fetchAndStore(keys, charge, seen).pipe(
          Effect.tap(() => Effect.sync(() => backoff.size > 0 && backoff.delete(groupOf(keys[0]!)))),
          Effect.tapError((error) =>
            charge._tag === "Background"
              ? Effect.flatMap(readAll(keys), (held) => noteFailure(groupOf(keys[0]!), error, held.some((entry) => entry !== undefined)))
              : Effect.void
          ),
          // Unregistered before the waiters wake: a later reader starts a new flight, never gets this one.
          Effect.onExit((exit) =>
            Effect.suspend(() => {
              for (const key of keys) if (flights.get(key) === deferred) flights.delete(key)
              onDone?.()
              return Deferred.done(deferred, exit)
            })
          )
        )
        yield* Effect.forkIn(work, scope, { startImmediately: true })
        return deferred
      }))

    /** One background refresh of the group of `key`, unless one runs or it backs off; returns at once. */
    const refresh = (key: string, now: number) =>
      Effect.suspend(() => {
        const group = groupOf(key)
        if (refreshing.has(group) || backingOff(group, now)) return Effect.void
        const along = options.fetchedTogether?.keys(key, now) ?? []
        const wanted = (along.includes(key) ? along : [key, ...along]).filter((k) => !flights.has(k))
        if (wanted.length === 0) return Effect.void
        refreshing.add(group)
        return Effect.asVoid(startFlight(wanted, Charge.background, undefined, () => refreshing.delete(group)))
      })

    /** The flight each of `keys` waits for, in their order: one running, else one started (one for all, or one each). */
    const flightsFor = (keys: ReadonlyArray<string>, charge: Charge, seen: number) =>
      Effect.gen(function*() {
        const waits: Array<Flight<A>> = []
        const toFetch: Array<number> = []
        for (let i = 0; i < keys.length; i++) {
          const running = flights.get(keys[i]!)
          if (running !== undefined) waits[i] = running
          else toFetch.push(i)
        }
        const batches = options.fetchedTogether !== undefined ? (toFetch.length === 0 ? [] : [toFetch]) : toFetch.map((i) => [i])
        for (const batch of batches) {
          const flight = yield* startFlight(batch.map((i) => keys[i]!), charge, seen)
          for (const i of batch) waits[i] = flight
        }
        return waits
      })

    /** Waits for the flights of `keys` (joining those running), until `deadline`: the entries, or why not. */
    const fill = (keys: ReadonlyArray<string>, charge: Charge, deadline: number, seen: number) =>
      Effect.gen(function*() {
        const waits = yield* flightsFor(keys, charge, seen)
        const timedOut = Effect.fail(sourceError(options.source, "Transient", "no answer within the request's budget"))
        const outcomes = new Map<Flight<A>, Exit.Exit<ReadonlyMap<string, Entry<A>>, SourceError>>()
        for (const flight of new Set(waits)) {
          const remaining = Math.max(0, deadline - (yield* Clock.currentTimeMillis))
          outcomes.set(flight, yield* Effect.exit(Effect.timeoutOrElse(Deferred.await(flight), { duration: Duration.millis(remaining), orElse: () => timedOut })))
        }
        const entries = new Map<string, Entry<A>>()
        const failures = new Map<string, SourceError>()
        for (let i = 0; i < keys.length; i++) {
          const exit = outcomes.get(waits[i]!)!
          if (Exit.isSuccess(exit)) {
            const entry = exit.value.get(keys[i]!)
            if (entry !== undefined) entries.set(keys[i]!, entry)
            else failures.set(keys[i]!, sourceError(options.source, "InvalidResponse", `no ${options.name} for ${keys[i]!}`))
          } else {
            const error = Cause.findErrorOption(exit.cause)
            if (Option.isSome(error)) failures.set(keys[i]!, error.value)
            else return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
          }
        }
        return { entries, failures }
      })

    const getAll = (keys: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const { charge, deadline } = yield* Spend
        const now = yield* Clock.currentTimeMillis
        const seen = generation
        const held = yield* readAll(keys)
        const out = new Map<string, Served<A>>()
        const cold: Array<string> = []
        const due: Array<string> = []
        const copies = new Map<string, Entry<A>>()
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i]!
          if (out.has(key) || cold.includes(key)) continue
          const hit = held[i]
          if (hit === undefined) {
            cold.push(key)
            continue
          }
          const freshness = freshnessOf(hit, now)
          if (freshness === "expired") {
            cold.push(key)
            copies.set(key, hit)
            continue
          }
          out.set(key, served(hit, freshness))
          if (freshness !== "fresh") due.push(key)
        }
        // After every key is read: an answer is made of one generation of copies.
        for (const key of due) yield* refresh(key, now)
        if (cold.length === 0) return { served: out, failures: new Map<string, SourceError>(), failure: undefined }
        const { entries, failures } = yield* fill(cold, charge, deadline, seen)
        const at = yield* Clock.currentTimeMillis
        for (const key of cold) {
          const entry = entries.get(key)
          if (entry !== undefined) {
            out.set(key, served(entry, freshnessOf(entry, at)))
            continue
          }
          // A not-found answer is not a failure of the source, and is never papered over with an old copy.
          const copy = copies.get(key)
          if (copy !== undefined && options.onFailure.lastGoodMs > 0 && copy.value !== null && failures.get(key)?.reason._tag !== "NotFound") {
            out.set(key, lastGood(copy))
          }
        }
        return { served: out, failures, failure: failures.values().next().value }
      })

    const get = (key: string) =>
      Effect.flatMap(getAll([key]), ({ failure, served }) => {
        const found = served.get(key)
        return found !== undefined ? Effect.succeed(found) : Effect.fail(failure!)
      })

    return { get, getAll }
  })

/** The copy as served now, when it is not expired. */
const served = <A>(entry: Entry<A>, freshness: Freshness): Served<A> =>
  ({ value: entry.value, storedAt: entry.storedAt, stale: false, holdsUntil: freshness === "fresh" ? entry.refreshAt : freshness === "due" ? entry.freshUntil : 0 })
const lastGood = <A>(entry: Entry<A>): Served<A> => ({ value: entry.value, storedAt: entry.storedAt, stale: true, holdsUntil: 0 })

/** A shared list's lease: lapses this long after its holder last renewed it (its calls take seconds each). */
const LEASE_MS = 60_000
/** The shortest wait between two loads of a list on its schedule. */
const MIN_RELOAD_WAIT_MS = 100

/**
 * A list a source answers (CoinGecko's currencies, coins and ranks; Coinbase's products), held apart from the copies:
 * one value, kept in this process whatever the store evicts, loaded at start (`warm`), then reloaded on its schedule
 * (`reloads`: once its period is over, backed off after a failure). Instances sharing the store adopt the copy one of
 * them stored, and load one at a time (a lease); the last good copy serves while reloads fail.
 */
export const makeHeldList = <A, I = any>(options: HeldListOptions<A, I>): Effect.Effect<HeldList<A>, never, CopyStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* CopyStore
    const scope = yield* Effect.scope
    const timing = { ttl: Duration.millis(options.reload.everyMs), refreshAhead: Duration.zero, grace: Duration.millis(options.reload.lastGoodMs) }
    const spread = Math.random() * (options.reload.spreadMs ?? 0)
    const freshness = (entry: Entry<A>, now: number) => freshnessOf(entry, now - spread)
    const decode = entryDecoder(options.value)
    let held: Entry<A> | undefined
    let loading: Deferred.Deferred<A, SourceError> | undefined
    let backoff = { until: 0, failures: 0 }

    /** Adopts the copy stored by another instance when newer than the one held: true when what is held is then fresh. */
    const adoptShared = Effect.gen(function*() {
      if (!store.shared) return false
      const stored = Option.getOrUndefined(Option.flatMap(yield* store.get(options.key), decode))
      if (stored !== undefined && (held === undefined || stored.storedAt > held.storedAt)) held = stored
      return held !== undefined && freshness(held, yield* Clock.currentTimeMillis) === "fresh"
    })

    const loadHere = Effect.gen(function*() {
      const value = deepFreeze(yield* options.load)
      const verdict = options.accept?.(value, held?.value) ?? true
      if (verdict !== true) {
        return yield* Effect.fail(sourceError(options.source, "InvalidResponse", `${options.name} refused: ${verdict}`))
      }
      const entry = held = entryOf(value, yield* Clock.currentTimeMillis, timing)
      if (store.shared) yield* store.set(options.key, entry as unknown as Schema.Json, Duration.millis(entry.graceUntil - entry.storedAt))
      return value
    })

    /** The copy another instance stored, else one loaded here: under the lease (renewed while the load runs), or alone. */
    const loadShared = underLease(store, options.key, LEASE_MS, UNANSWERED_CLAIMS_ALONE.list, Effect.map(adoptShared, (fresh) => fresh ? held!.value : undefined), loadHere)

    const noteFailure = (error: SourceError) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const longest = held !== undefined ? MAX_BACKOFF_MS : Math.min(MAX_BACKOFF_MS, options.retry.maxMsWhileNoneHeld ?? MAX_BACKOFF_MS)
        const waitMs = retryWaitMs(backoff.failures + 1, options.retry.firstMs, longest, error)
        backoff = { until: at + waitMs, failures: backoff.failures + 1 }
        return Effect.logWarning(failureLine(options.name, held !== undefined, waitMs), error.message)
      })

    /** The load running, else one started in the holder's scope unless loads back off (undefined); uninterruptible, as a flight. */
    const loadNow = (now: number) =>
      Effect.uninterruptible(Effect.suspend(() => {
        if (loading !== undefined || backoff.until > now) return Effect.succeed(loading)
        const deferred = loading = Deferred.makeUnsafe<A, SourceError>()
        const work = loadShared.pipe(
          Effect.tap(() => Effect.sync(() => backoff = { until: 0, failures: 0 })),
          Effect.tapError(noteFailure),
          // Forgotten before the waiters wake: a later reader starts a new load, never gets this one.
          Effect.onExit((exit) => Effect.suspend(() => (loading = undefined, Deferred.done(deferred, exit)))),
          // The service's own work, whichever reader started it.
          spendingUntil(Number.POSITIVE_INFINITY, Charge.background)
        )
        return Effect.as(Effect.forkIn(work, scope, { startImmediately: true }), deferred)
      }))

    const get = Effect.gen(function*() {
      const { deadline } = yield* Spend
      const now = yield* Clock.currentTimeMillis
      // Another instance may have stored a fresh copy: adopted rather than loaded, even while loads here back off.
      if (held === undefined || freshness(held, now) !== "fresh") yield* adoptShared
      const copy = held
      const state = copy === undefined ? "expired" : freshness(copy, now)
      if (copy !== undefined && state !== "expired") return copy.value
      // None held, or past its last good time: the load running (its schedule's), else one now unless loads back off.
      const running = yield* loadNow(now)
      if (running !== undefined) {
        const waited = yield* Effect.exit(Effect.timeoutOption(Deferred.await(running), Duration.millis(Math.max(0, deadline - now))))
        if (Exit.isSuccess(waited) && Option.isSome(waited.value)) return waited.value.value
      }
      if (copy !== undefined) return copy.value
      const retryAfterSeconds = Math.max(1, Math.ceil((backoff.until - (yield* Clock.currentTimeMillis)) / 1000))
      return yield* Effect.fail(sourceError(options.source, "Unavailable", `the ${options.name} is not loaded yet`, retryAfterSeconds))
    })

    const warm = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (held !== undefined && freshness(held, now) === "fresh") return
      const running = yield* loadNow(now)
      if (running !== undefined) yield* Effect.exit(Deferred.await(running))
    })

    /** The next load is due at its period's end (later by this instance's spread), or after a failure, at its back-off. */
    const due = Schedule.spaced(Duration.zero).pipe(Schedule.modifyDelay(() =>
      Effect.map(Clock.currentTimeMillis, (now) =>
        Duration.millis(Math.max(MIN_RELOAD_WAIT_MS, backoff.until > now ? backoff.until - now : (held?.refreshAt ?? now) + spread - now)))))

    return { get, warm, reloads: Effect.asVoid(Effect.repeat(warm, due)) }
  })

// A copy's lifecycle (entry.ts has its shape), the same for both holders


/** The entry of `value` fetched at `storedAt`, served as `timing` says. */
const entryOf = <A>(value: A, storedAt: number, timing: Timing): Entry<A> => {
  const freshUntil = storedAt + Duration.toMillis(timing.ttl)
  return { storedAt, refreshAt: freshUntil - Duration.toMillis(timing.refreshAhead), freshUntil, graceUntil: freshUntil + Duration.toMillis(timing.grace), value }
}

/** Where a copy stands at `now` (see above). */
type Freshness = "fresh" | "due" | "grace" | "expired"
const freshnessOf = (entry: Entry<unknown>, now: number): Freshness =>
  now < entry.refreshAt ? "fresh" : now < entry.freshUntil ? "due" : now < entry.graceUntil ? "grace" : "expired"

/** Reads back stored entries, validated once per frozen object (CopyStore.ts); unfrozen ones (tests) every time. */
const entryDecoder = <A, I>(value: Schema.Codec<A, I>): (json: unknown) => Option.Option<Entry<A>> => {
  const finite = Schema.Finite
  const decode = Schema.decodeUnknownOption(Schema.Struct({ storedAt: finite, refreshAt: finite, freshUntil: finite, graceUntil: finite, value }))
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

/**
 * The wait after the `failures`th failure in a row: doubling from `firstMs` up to `longestMs`; a refusal that says
 * when to come back (the month's pace, a 429) is taken at its word.
 */
const retryWaitMs = (failures: number, firstMs: number, longestMs: number, error: SourceError) =>
  Math.max(Math.min(longestMs, firstMs * 2 ** (failures - 1)), error.retryAfterSeconds * 1000)
/** What a failed background fetch logs. */
const failureLine = (name: string, held: boolean, waitMs: number) =>
  `rates: ${name} unavailable; ${held ? "serving the last good copy" : "none held yet"}, next try in ${Math.round(waitMs / 1000)} s`
