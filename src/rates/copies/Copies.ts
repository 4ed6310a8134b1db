/**
 * The one way the rates capability holds copies of its sources' answers (entry.ts), over the one `CopyStore`: single
 * flight, stale-if-error (also when `accept` refuses), negative answers apart, background refreshes with backoff.
 * A fetch runs in the holder's scope: a reader that stops waiting wastes no paid call (Effect's `Cache` would).
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Option, Schema, type Scope } from "effect"
import { Charge, type SourceError, sourceError } from "../upstream.ts"
import { CopyStore, type CopyWrite } from "./CopyStore.ts"
import { deepFreeze } from "../../platform/deepFreeze.ts"
import type { Copies, CopiesOptions, Entry, Served } from "./entry.ts"

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
    const keyOf = options.keyOf ?? ((key: K) => key as unknown as string)
    const groupOf = (key: K) => options.refreshGroup?.of(key) ?? keyOf(key)
    const spread = Math.random() * (options.refreshSpreadMs ?? 0)
    const flights = new Map<string, Flight<A>>()
    const refreshing = new Set<string>()
    const backoff = new Map<string, { readonly until: number; readonly failures: number }>()
    const pinned = new Map<string, Entry<A>>()
    // Counts this holder's writes: in a store no other instance writes, an unchanged count means no re-read.
    let generation = 0
    const decode = entryDecoder(options.value)
    // One store operation per read or write of many copies (a test's store may have only get and set).
    const getMany = store.getMany ?? ((keys: ReadonlyArray<string>) => Effect.forEach(keys, store.get))
    const setMany = store.setMany ??
      ((writes: ReadonlyArray<CopyWrite>) => Effect.forEach(writes, (w) => store.set(w.key, w.value, w.timeToLive, { negative: w.negative }), { discard: true }))

    /** The copies held under `storeKeys` (undefined: none), in one read of the store. */
    const readAll = (storeKeys: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<Entry<A> | undefined>> => {
      if (options.pinned === true && !store.shared) return Effect.sync(() => storeKeys.map((storeKey) => pinned.get(storeKey)))
      return Effect.map(getMany(storeKeys), (found) => {
        const out: Array<Entry<A> | undefined> = []
        for (let i = 0; i < storeKeys.length; i++) {
          const stored = Option.getOrUndefined(Option.flatMap(found[i]!, decode))
          const local = options.pinned === true ? pinned.get(storeKeys[i]!) : undefined
          const newer = local !== undefined && stored !== undefined && stored.storedAt > local.storedAt
          if (newer) pinned.set(storeKeys[i]!, stored)
          out.push(local === undefined || newer ? stored : local)
        }
        return out
      })
    }

    /** Stores `[storeKey, entry, negative]` each, in one write of the store; TTLs are decided here. */
    const writeAll = (written: ReadonlyArray<readonly [string, Entry<A>, boolean]>) => {
      generation++
      const writes: Array<CopyWrite> = []
      for (const [storeKey, entry, negative] of written) {
        if (options.pinned === true) {
          pinned.set(storeKey, entry)
          if (!store.shared) continue
        }
        const keepFor = negative ? entry.freshUntil - entry.storedAt : Math.max(entry.graceUntil - entry.storedAt, options.lastGoodMs)
        writes.push({ key: storeKey, value: entry as unknown as Schema.Json, timeToLive: Duration.millis(keepFor), negative })
      }
      return writes.length === 0 ? Effect.void : setMany(writes)
    }

    /** The copies of `storeKeys` fresh now, when every one of them is; else none. */
    const allFresh = (storeKeys: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const held = yield* readAll(storeKeys)
        const out = new Map<string, Entry<A>>()
        for (let i = 0; i < storeKeys.length; i++) {
          const entry = held[i]
          if (entry !== undefined && freshnessOf(entry, now) === "fresh") out.set(storeKeys[i]!, entry)
        }
        return out.size === storeKeys.length ? out : undefined
      })

    /** A shared key (`loadLeaseMs`) is loaded by one instance at a time; the others wait for its copy. */
    const leaseMs = options.loadLeaseMs ?? (options.pinned === true ? LIST_LEASE_MS : undefined)
    const waitForSharedLoad = (storeKeys: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        if (leaseMs === undefined || store.claim === undefined) return { lease: undefined, copies: undefined }
        const lease = `${storeKeys[0]!}:loading`
        if (yield* store.claim(lease, Duration.millis(leaseMs))) return { lease, copies: undefined }
        for (let waited = 0; waited < leaseMs; waited += LEASE_POLL_MS) {
          yield* Effect.sleep(Duration.millis(LEASE_POLL_MS))
          const loaded = yield* allFresh(storeKeys)
          if (loaded !== undefined) return { lease: undefined, copies: loaded }
        }
        return { lease: undefined, copies: undefined }
      })

    /** Fetches and stores, unless all are fresh again; `seen`: the `generation` at which the caller found them not. */
    const fetchAndStore = (keys: ReadonlyArray<K>, storeKeys: ReadonlyArray<string>, charge: Charge, seen: number | undefined) =>
      Effect.gen(function*() {
        const held = seen === generation && !store.shared ? undefined : yield* allFresh(storeKeys)
        if (held !== undefined) return held
        const shared = yield* waitForSharedLoad(storeKeys)
        if (shared.copies !== undefined) return shared.copies
        const answered = yield* options.fetch(keys, charge).pipe(
          Effect.ensuring(shared.lease === undefined || store.release === undefined ? Effect.void : store.release(shared.lease))
        )
        // Plain loops: the holder's callbacks run one after another, not interleaved with ours.
        const fetchedKeys: Array<string> = []
        const values: Array<A> = []
        for (const [key, raw] of answered) {
          fetchedKeys.push(keyOf(key))
          values.push(deepFreeze(raw))
        }
        if (options.accept !== undefined) {
          const before = yield* readAll(fetchedKeys)
          for (let i = 0; i < values.length; i++) {
            const verdict = options.accept(values[i]!, before[i]?.value)
            if (verdict === true) continue
            return yield* Effect.fail(sourceError(options.source, "InvalidResponse", `${options.name} refused: ${verdict}`))
          }
        }
        const storedAt = yield* Clock.currentTimeMillis
        const out = new Map<string, Entry<A>>()
        const written: Array<readonly [string, Entry<A>, boolean]> = []
        for (let i = 0; i < values.length; i++) {
          const value = values[i]!
          const timing = options.timing(value, storedAt, answered[i]![0])
          const freshUntil = storedAt + Duration.toMillis(timing.ttl)
          const entry: Entry<A> = {
            storedAt,
            refreshAt: freshUntil - Duration.toMillis(timing.refreshAhead),
            freshUntil,
            graceUntil: freshUntil + Duration.toMillis(timing.grace),
            value
          }
          written.push([fetchedKeys[i]!, entry, options.isNegative?.(value) === true])
          out.set(fetchedKeys[i]!, entry)
        }
        yield* writeAll(written)
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

    /** Starts one fetch of `keys` as their flight, in the holder's scope; its group is asked only on backoff. */
    const startFlight = (keys: ReadonlyArray<K>, storeKeys: ReadonlyArray<string>, charge: Charge, seen?: number, group?: string, onDone?: () => void) =>
      Effect.gen(function*() {
        const deferred = Deferred.makeUnsafe<ReadonlyMap<string, Entry<A>>, SourceError>()
        // Registered synchronously, before any yield, so a reader in the same tick finds it.
        for (const storeKey of storeKeys) flights.set(storeKey, deferred)
        const groupNow = () => group ??= groupOf(keys[0]!)
        const work = fetchAndStore(keys, storeKeys, charge, seen).pipe(
          Effect.tap(() => Effect.sync(() => backoff.size > 0 && backoff.delete(groupNow()))),
          Effect.tapError((error) =>
            charge._tag === "Background"
              ? Effect.flatMap(readAll(storeKeys), (held) => noteFailure(groupNow(), error, held.some((entry) => entry !== undefined)))
              : Effect.void
          ),
          // Unregistered before the waiters wake: a later reader starts a new flight, never gets this one.
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
    const refresh = (key: K, storeKey: string, now: number) =>
      Effect.suspend(() => {
        const group = groupOf(key)
        if (refreshing.has(group) || backingOff(group, now)) return Effect.void
        const along = options.refreshGroup?.keys(key, now) ?? []
        const alongKeys = along.map(keyOf)
        const withKey = alongKeys.includes(storeKey)
        const wanted = (withKey ? alongKeys : [storeKey, ...alongKeys]).flatMap((k, i) => flights.has(k) ? [] : [i])
        if (wanted.length === 0) return Effect.void
        const all = withKey ? along : [key, ...along]
        const allKeys = withKey ? alongKeys : [storeKey, ...alongKeys]
        refreshing.add(group)
        return Effect.asVoid(startFlight(wanted.map((i) => all[i]!), wanted.map((i) => allKeys[i]!), Charge.background, undefined, undefined, () => refreshing.delete(group)))
      })

    /** The flight each of `keys` waits for, in their order: one running, else one started (one for all, or one each). */
    const flightsFor = (keys: ReadonlyArray<K>, storeKeys: ReadonlyArray<string>, charge: Charge, now: number, seen: number) =>
      Effect.gen(function*() {
        const waits: Array<Flight<A>> = []
        const toFetch: Array<number> = []
        for (let i = 0; i < keys.length; i++) {
          const running = flights.get(storeKeys[i]!)
          if (running !== undefined) waits[i] = running
          else toFetch.push(i)
        }
        const batches = options.batched === true ? (toFetch.length === 0 ? [] : [toFetch]) : toFetch.map((i) => [i])
        for (const batch of batches) {
          const group = charge._tag === "Background" && backoff.size > 0 ? groupOf(keys[batch[0]!]!) : undefined
          if (group !== undefined && backingOff(group, now)) {
            const refused = Deferred.makeUnsafe<ReadonlyMap<string, Entry<A>>, SourceError>()
            Deferred.doneUnsafe(refused, Exit.fail(sourceError(
              options.source,
              "Unavailable",
              `the ${options.name} is not held and cannot be loaded now`,
              Math.ceil((backoff.get(group)!.until - now) / 1000)
            )))
            for (const i of batch) waits[i] = refused
            continue
          }
          const flight = yield* startFlight(batch.map((i) => keys[i]!), batch.map((i) => storeKeys[i]!), charge, seen, group)
          for (const i of batch) waits[i] = flight
        }
        return waits
      })

    /** Waits for the flights of `keys` (joining those running), until `deadline`: the entries, or why not. */
    const fill = (keys: ReadonlyArray<K>, storeKeys: ReadonlyArray<string>, charge: Charge, deadline: number, seen: number) =>
      Effect.gen(function*() {
        const waits = yield* flightsFor(keys, storeKeys, charge, yield* Clock.currentTimeMillis, seen)
        const timedOut = Effect.fail(sourceError(options.source, "Transient", "no answer within the request's budget"))
        const outcomes = new Map<Flight<A>, Exit.Exit<ReadonlyMap<string, Entry<A>>, SourceError>>()
        for (const flight of new Set(waits)) {
          const remaining = Math.max(0, deadline - (yield* Clock.currentTimeMillis))
          outcomes.set(flight, yield* Effect.exit(Effect.timeoutOrElse(Deferred.await(flight), { duration: Duration.millis(remaining), orElse: () => timedOut })))
        }
        const entries = new Map<K, Entry<A>>()
        const failures = new Map<K, SourceError>()
        for (let i = 0; i < keys.length; i++) {
          const exit = outcomes.get(waits[i]!)!
          if (Exit.isSuccess(exit)) {
            const entry = exit.value.get(storeKeys[i]!)
            if (entry !== undefined) entries.set(keys[i]!, entry)
            else failures.set(keys[i]!, sourceError(options.source, "InvalidResponse", `no ${options.name} for ${storeKeys[i]!}`))
          } else {
            const error = Cause.findErrorOption(exit.cause)
            if (Option.isSome(error)) failures.set(keys[i]!, error.value)
            else return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
          }
        }
        return { entries, failures }
      })

    const getAll = (keys: ReadonlyArray<K>, charge: Charge, deadline: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const storeKeys = keys.map(keyOf)
        const seen = generation
        const held = yield* readAll(storeKeys)
        const out = new Map<K, Served<A>>()
        const cold: Array<K> = []
        const coldStoreKeys: Array<string> = []
        const due: Array<number> = []
        const copies = new Map<K, Entry<A>>()
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i]!
          if (out.has(key) || cold.includes(key)) continue
          const hit = held[i]
          if (hit === undefined) {
            cold.push(key)
            coldStoreKeys.push(storeKeys[i]!)
            continue
          }
          const freshness = freshnessOf(hit, now - spread)
          if (freshness === "expired") {
            cold.push(key)
            coldStoreKeys.push(storeKeys[i]!)
            copies.set(key, hit)
            continue
          }
          out.set(key, served(hit, freshnessOf(hit, now)))
          if (freshness !== "fresh") due.push(i)
        }
        // After every key is read: an answer is made of one generation of copies.
        for (const i of due) yield* refresh(keys[i]!, storeKeys[i]!, now)
        if (cold.length === 0) return { served: out, failures: new Map<K, SourceError>(), failure: undefined }
        const { entries, failures } = yield* fill(cold, coldStoreKeys, charge, deadline, seen)
        const at = yield* Clock.currentTimeMillis
        for (const key of cold) {
          const entry = entries.get(key)
          if (entry !== undefined) {
            out.set(key, served(entry, freshnessOf(entry, at)))
            continue
          }
          // A not-found answer is not a failure of the source, and is never papered over with an old copy.
          const copy = copies.get(key)
          if (copy !== undefined && options.lastGoodMs > 0 && options.isNegative?.(copy.value) !== true && failures.get(key)?.reason._tag !== "NotFound") {
            out.set(key, lastGood(copy))
          }
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
        const storeKey = keyOf(key)
        const [held] = yield* readAll([storeKey])
        if (held !== undefined && freshnessOf(held, now - spread) === "fresh") return
        yield* refresh(key, storeKey, now)
        const flight = flights.get(storeKey)
        if (flight !== undefined) yield* Effect.exit(Deferred.await(flight))
      })
    const retryAfterSeconds = (key: K) =>
      Effect.map(Clock.currentTimeMillis, (now) => Math.max(1, Math.ceil(((backoff.get(groupOf(key))?.until ?? now) - now) / 1000)))

    return { get, getAll, warm, retryAfterSeconds }
  })

// A copy's lifecycle (entry.ts has its shape)

type Freshness = "fresh" | "due" | "grace" | "expired"
const freshnessOf = (entry: Entry<unknown>, now: number): Freshness =>
  now < entry.refreshAt ? "fresh" : now < entry.freshUntil ? "due" : now < entry.graceUntil ? "grace" : "expired"

/** The copy as served now, when it is not expired. */
const served = <A>(entry: Entry<A>, freshness: Freshness): Served<A> =>
  ({ value: entry.value, storedAt: entry.storedAt, stale: false, holdsUntil: freshness === "fresh" ? entry.refreshAt : freshness === "due" ? entry.freshUntil : 0 })
const lastGood = <A>(entry: Entry<A>): Served<A> => ({ value: entry.value, storedAt: entry.storedAt, stale: true, holdsUntil: 0 })

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
