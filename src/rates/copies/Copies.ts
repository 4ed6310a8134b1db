/**
 * The one way the rates capability holds copies of its sources' answers (entry.ts), over the one `CopyStore`: single
 * flight, stale-if-error, negative answers apart, background refreshes with backoff; the lists are held apart (HeldList.ts).
 * A fetch runs in the holder's scope: a reader that stops waiting wastes no paid call (Effect's `Cache` would).
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Option, type Schema, type Scope } from "effect"
import { Charge, type SourceError, sourceError, Spend, spendingUntil } from "../upstream.ts"
import { CopyStore, type CopyWrite } from "./CopyStore.ts"
import { deepFreeze } from "../../platform/deepFreeze.ts"
import { type Copies, type CopiesOptions, type Entry, entryDecoder, entryOf, failureLine, type Freshness, freshnessOf, retryWaitMs, type Served } from "./entry.ts"

export type { Copies } from "./entry.ts"

const MAX_BACKOFF_MS = 3_600_000
const LEASE_POLL_MS = 250
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

    /** A shared key (`loadLeaseMs`) is loaded by one instance at a time; the others wait for its copy. */
    const waitForSharedLoad = (keys: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const leaseMs = options.loadLeaseMs
        if (leaseMs === undefined || store.claim === undefined) return { lease: undefined, copies: undefined }
        const lease = `${keys[0]!}:loading`
        if (yield* store.claim(lease, Duration.millis(leaseMs))) return { lease, copies: undefined }
        for (let waited = 0; waited < leaseMs; waited += LEASE_POLL_MS) {
          yield* Effect.sleep(Duration.millis(LEASE_POLL_MS))
          const loaded = yield* allFresh(keys)
          if (loaded !== undefined) return { lease: undefined, copies: loaded }
        }
        return { lease: undefined, copies: undefined }
      })

    /** Fetches and stores, unless all are fresh again; `seen`: the `generation` at which the caller found them not. */
    const fetchAndStore = (keys: ReadonlyArray<string>, charge: Charge, seen: number | undefined) =>
      Effect.gen(function*() {
        const held = seen === generation && !store.shared ? undefined : yield* allFresh(keys)
        if (held !== undefined) return held
        const shared = yield* waitForSharedLoad(keys)
        if (shared.copies !== undefined) return shared.copies
        // Paid by whoever started the flight; it is not bound by any reader's deadline (the copy lands for the next).
        const answered = yield* options.fetch(keys).pipe(
          spendingUntil(Number.POSITIVE_INFINITY, charge),
          Effect.ensuring(shared.lease === undefined || store.release === undefined ? Effect.void : store.release(shared.lease))
        )
        const storedAt = yield* Clock.currentTimeMillis
        const out = new Map<string, Entry<A>>()
        // A plain loop: the holder's callbacks run one after another, not interleaved with ours.
        for (const [key, raw] of answered) {
          const value = deepFreeze(raw)
          out.set(key, entryOf(value, storedAt, options.timing(value, storedAt, key)))
        }
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
    const startFlight = (keys: ReadonlyArray<string>, charge: Charge, seen?: number, onDone?: () => void) =>
      Effect.gen(function*() {
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
      })

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
