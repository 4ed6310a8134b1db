/**
 * A list a source answers (CoinGecko's currencies, coins and ranks; Coinbase's products), held apart from the copies
 * (Copies.ts): one value, kept in this process whatever the store evicts, loaded at start (`warm`), then reloaded by
 * the first read once its period is over (a list nobody reads costs no call). Instances sharing the store adopt the
 * copy one of them stored, and load one at a time (a lease); the last good copy serves while reloads fail, backed off.
 */
import { Clock, Deferred, Duration, Effect, Exit, Option, type Schema, type Scope } from "effect"
import { deepFreeze } from "../../platform/deepFreeze.ts"
import { Charge, type SourceError, sourceError, type SourceName, Spend, spendingUntil } from "../upstream.ts"
import { CopyStore } from "./CopyStore.ts"
import { type Entry, entryDecoder, entryOf, failureLine, freshnessOf, retryWaitMs } from "./entry.ts"

const MAX_BACKOFF_MS = 3_600_000
/** How long one instance may load a shared list before another may (its calls take seconds each). */
const LEASE_MS = 60_000
const LEASE_POLL_MS = 250

interface HeldListOptions<A, I> {
  /** For logs and errors: "coin list". */
  readonly name: string
  readonly source: SourceName
  /** Where it is shared with other instances, `rates:v2:<kind>` (the store's entry shape: entry.ts). */
  readonly key: string
  /** What it is: a copy read back from the store is validated with it (another instance or release may have written it). */
  readonly value: Schema.Codec<A, I>
  readonly load: Effect.Effect<A, SourceError>
  /**
   * Reloaded every `everyMs`, by each instance up to `spreadMs` later (so that one loads and the others adopt its
   * copy). Past `lastGoodMs` more (the store keeps it that long), a reader waits for the reload, until its deadline,
   * before taking the copy held.
   */
  readonly reload: { readonly everyMs: number; readonly spreadMs?: number | undefined; readonly lastGoodMs: number }
  /** After a failed load, the first wait: it doubles up to an hour, or up to `maxMsWhileNoneHeld` while none is held. */
  readonly retry: { readonly firstMs: number; readonly maxMsWhileNoneHeld?: number | undefined }
  /** Whether a loaded list may replace the one held (undefined: none); a string (why not) fails the load. */
  readonly accept?: ((fresh: A, held: A | undefined) => true | string) | undefined
}

interface HeldList<A> {
  /** The list held (reloaded behind when due), else the load waited for until the `Spend` deadline, else `Unavailable`. */
  readonly get: Effect.Effect<A, SourceError>
  /** Loads it unless it is fresh or loads back off (start-up); ends when that load does. */
  readonly warm: Effect.Effect<void>
}

// The encoded side of a value is whatever its schema reads (`any` lets callers name only A).
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

    /** The copy another instance stored, else one loaded here: under the lease, or after a minute waiting for it. */
    const loadShared = Effect.gen(function*() {
      if (yield* adoptShared) return held!.value
      const lease = `${options.key}:loading`
      const claimed = store.claim === undefined ? undefined : yield* store.claim(lease, Duration.millis(LEASE_MS))
      for (let waited = 0; claimed === false && waited < LEASE_MS; waited += LEASE_POLL_MS) {
        yield* Effect.sleep(Duration.millis(LEASE_POLL_MS))
        if (yield* adoptShared) return held!.value
      }
      const release = claimed === true && store.release !== undefined ? store.release(lease) : Effect.void
      const value = deepFreeze(yield* Effect.ensuring(options.load, release))
      const verdict = options.accept?.(value, held?.value) ?? true
      if (verdict !== true) {
        return yield* Effect.fail(sourceError(options.source, "InvalidResponse", `${options.name} refused: ${verdict}`))
      }
      const entry = held = entryOf(value, yield* Clock.currentTimeMillis, timing)
      if (store.shared) yield* store.set(options.key, entry as unknown as Schema.Json, Duration.millis(entry.graceUntil - entry.storedAt))
      return value
    })

    const noteFailure = (error: SourceError) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const longest = held !== undefined ? MAX_BACKOFF_MS : Math.min(MAX_BACKOFF_MS, options.retry.maxMsWhileNoneHeld ?? MAX_BACKOFF_MS)
        const waitMs = retryWaitMs(backoff.failures + 1, options.retry.firstMs, longest, error)
        backoff = { until: at + waitMs, failures: backoff.failures + 1 }
        return Effect.logWarning(failureLine(options.name, held !== undefined, waitMs), error.message)
      })

    /** The load running, else one started in the holder's scope unless loads back off (undefined). */
    const loadNow = (now: number) =>
      Effect.suspend(() => {
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
      })

    const get = Effect.gen(function*() {
      const { deadline } = yield* Spend
      const now = yield* Clock.currentTimeMillis
      // Another instance may have stored a fresh copy: adopted rather than loaded, even while loads here back off.
      if (held === undefined || freshness(held, now) !== "fresh") yield* adoptShared
      const copy = held
      const state = copy === undefined ? "expired" : freshness(copy, now)
      const running = state === "fresh" ? undefined : yield* loadNow(now)
      if (copy !== undefined && state !== "expired") return copy.value
      if (running !== undefined) {
        const waited = yield* Effect.exit(Effect.timeoutOption(Deferred.await(running), Duration.millis(Math.max(0, deadline - now))))
        if (Exit.isSuccess(waited) && Option.isSome(waited.value)) return waited.value.value
      }
      if (copy !== undefined) return copy.value
      const retryAfterSeconds = Math.max(1, Math.ceil((backoff.until - (yield* Clock.currentTimeMillis)) / 1000))
      return yield* Effect.fail(sourceError(options.source, "Unavailable", `no ${options.name} loaded yet`, retryAfterSeconds))
    })

    const warm = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (held !== undefined && freshness(held, now) === "fresh") return
      const running = yield* loadNow(now)
      if (running !== undefined) yield* Effect.exit(Deferred.await(running))
    })

    return { get, warm }
  })
