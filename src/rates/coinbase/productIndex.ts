/**
 * Coinbase's product list, held in memory: loaded in the background, reloaded once `refreshMs` has
 * passed (the first read after that starts the reload and is answered from the copy held), never
 * fetched on a request's behalf. The pattern of the CoinGecko coin index (src/rates/auxiliary.ts),
 * without its Redis copy: the list is one keyless call, cheap for every instance to make.
 *
 * - Last good kept: a failed reload keeps the copy held.
 * - Failures remembered: after one, the next attempt waits `retryMs`, doubling up to an hour, whoever
 *   asks meanwhile; a read finding nothing held waits (until its deadline) only for a load running or
 *   due, else fails `unavailable` with the time until the next attempt.
 */
import { Clock, Deferred, Duration, Effect, type Scope } from "effect"
import { type CoinbaseError, type CoinbaseProduct, failWith } from "./coinbaseResponses.ts"

export interface ProductIndexOptions {
  readonly fetch: Effect.Effect<ReadonlyArray<CoinbaseProduct>, CoinbaseError>
  readonly refreshMs: number
  readonly retryMs: number
}

export interface ProductIndex {
  /** Starts the first load unless one ran (at start-up, so the list is held before it is needed). */
  readonly warm: Effect.Effect<void>
  /** The held list; when none, waits until `deadline` at most for a load running or due. */
  readonly get: (deadline: number) => Effect.Effect<ReadonlyArray<CoinbaseProduct>, CoinbaseError>
}

const MAX_BACKOFF_MS = 3_600_000

interface Held {
  readonly products: ReadonlyArray<CoinbaseProduct>
  readonly loadedAt: number
}

export const makeProductIndex = (options: ProductIndexOptions): Effect.Effect<ProductIndex, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    let held: Held | undefined
    let failures = 0
    let nextAttemptAt = 0
    let loading: Deferred.Deferred<void> | undefined

    const loadOnce = Effect.gen(function*() {
      const fetched = yield* Effect.result(options.fetch)
      const at = yield* Clock.currentTimeMillis
      if (fetched._tag === "Failure") {
        failures++
        nextAttemptAt = at + Math.min(MAX_BACKOFF_MS, options.retryMs * 2 ** (failures - 1))
        yield* Effect.logWarning(
          `rates: Coinbase product list unavailable; ${held === undefined ? "none held yet" : "serving the last good copy"}, next try in ${
            Math.round((nextAttemptAt - at) / 1000)
          } s`,
          fetched.failure.message
        )
        return
      }
      failures = 0
      held = { products: fetched.success, loadedAt: at }
      nextAttemptAt = at + options.refreshMs
    })

    /** Starts a load unless one runs or the next attempt is not due; the running load, if any. */
    const startIfDue = Effect.gen(function*() {
      if (loading !== undefined) return loading
      const now = yield* Clock.currentTimeMillis
      if (now < nextAttemptAt) return undefined
      const done = Deferred.makeUnsafe<void>()
      loading = done
      yield* Effect.forkIn(
        loadOnce.pipe(Effect.ensuring(Effect.suspend(() => {
          loading = undefined
          return Deferred.succeed(done, undefined)
        }))),
        scope,
        { startImmediately: true }
      )
      return done
    })

    const get = (deadline: number): Effect.Effect<ReadonlyArray<CoinbaseProduct>, CoinbaseError> =>
      Effect.gen(function*() {
        const running = yield* startIfDue
        if (held !== undefined) return held.products
        if (running !== undefined) {
          const now = yield* Clock.currentTimeMillis
          yield* Deferred.await(running).pipe(Effect.timeoutOption(Duration.millis(Math.max(0, deadline - now))))
        }
        // Set by the load meanwhile (TypeScript cannot see through the closure).
        const loaded = held as Held | undefined
        if (loaded !== undefined) return loaded.products
        const now = yield* Clock.currentTimeMillis
        return yield* failWith("unavailable", "the Coinbase product list is not loaded yet", Math.max(1, Math.ceil((nextAttemptAt - now) / 1000)))
      })

    return { warm: Effect.asVoid(startIfDue), get }
  })
