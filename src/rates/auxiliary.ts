/**
 * An auxiliary list (the currency list, the coin index): loaded in the background at start, then again
 * once `refreshEvery` has passed (the first read after that starts the reload and is answered from the
 * copy held), held in memory, never fetched on a request's behalf one by one.
 *
 * - Last good kept: a failed reload keeps the copy held (and, with Redis, the copy another instance
 *   stored); the request path only ever reads what is held.
 * - Failures remembered: after one, the next attempt waits `COINGECKO_AUX_RETRY_MS`, doubling up to an
 *   hour, whoever asks meanwhile; a request finding nothing held waits (until its deadline) only for a
 *   load already running or due.
 * - Shared through Redis when the cache is (`RatesCache.shared`): an instance adopts a copy another
 *   stored less than `refreshEvery` ago instead of fetching its own.
 * Its calls are outside the data calls' breaker (CoinGeckoClient.ts), so its outage never refuses data.
 */
import { Clock, Deferred, Duration, Effect, Option, type Schema, type Scope } from "effect"
import type { CoinGeckoError } from "./coinGeckoResponses.ts"
import { RatesCache } from "./RatesCache.ts"
import { RatesConfig } from "./RatesConfig.ts"
import { type EntryDecoder, type Entry } from "./staleCache.ts"
import { CurrentCharge } from "./upstreamGuards.ts"

export interface AuxiliaryOptions<A extends Schema.Json> {
  /** For logs: "currency list". */
  readonly name: string
  /** Cache key of the shared copy. */
  readonly key: string
  readonly entry: EntryDecoder<A>
  /** The upstream calls that make a fresh copy. */
  readonly fetch: Effect.Effect<A, CoinGeckoError>
  readonly refreshEvery: Duration.Duration
}

export interface Auxiliary<A> {
  /** The held copy; when none, waits until `deadline` at most for a load running or due. */
  readonly get: (deadline: number) => Effect.Effect<A | undefined>
  /** Seconds until the next load may be tried (a Retry-After while nothing is held). */
  readonly retryAfterSeconds: Effect.Effect<number>
}

const MAX_BACKOFF_MS = 3_600_000
/** Instances sharing a copy reload a little apart, so one fetches and the others adopt its copy. */
const RELOAD_SPREAD_MS = 5 * 60_000

/** Makes the list and starts its first load, in the background (interrupted when the scope closes). */
export const makeAuxiliary = <A extends Schema.Json>(
  options: AuxiliaryOptions<A>
): Effect.Effect<Auxiliary<A>, never, RatesCache | RatesConfig | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* RatesConfig
    const cache = yield* RatesCache
    const scope = yield* Effect.scope
    const everyMs = Duration.toMillis(options.refreshEvery)
    const keepMs = Math.max(everyMs, Duration.toMillis(Duration.hours(config.staleTtlHours)))
    let held: Entry<A> | undefined
    let failures = 0
    let nextAttemptAt = 0
    let loading: Deferred.Deferred<void> | undefined

    const adopt = (entry: Entry<A>) => {
      if (held === undefined || entry.storedAt > held.storedAt) held = entry
    }
    const sharedCopy = cache.shared
      ? Effect.map(cache.get(options.key), (found) => Option.flatMap(found, options.entry))
      : Effect.succeed(Option.none<Entry<A>>())

    const loadOnce = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const stored = yield* sharedCopy
      if (Option.isSome(stored)) adopt(stored.value)
      if (held !== undefined && now < held.storedAt + everyMs) {
        nextAttemptAt = held.storedAt + everyMs + Math.random() * RELOAD_SPREAD_MS
        return
      }
      const fetched = yield* Effect.result(options.fetch)
      const at = yield* Clock.currentTimeMillis
      if (fetched._tag === "Failure") {
        failures++
        nextAttemptAt = at + Math.min(MAX_BACKOFF_MS, config.auxiliaryRetryMs * 2 ** (failures - 1))
        yield* Effect.logWarning(
          `rates: ${options.name} unavailable; ${held === undefined ? "none held yet" : "serving the last good copy"}, next try in ${
            Math.round((nextAttemptAt - at) / 1000)
          } s`,
          fetched.failure.message
        )
        return
      }
      failures = 0
      const entry: Entry<A> = { storedAt: at, refreshAt: at + everyMs, freshUntil: at + everyMs, graceUntil: at + everyMs, value: fetched.success }
      held = entry
      nextAttemptAt = at + everyMs + Math.random() * RELOAD_SPREAD_MS
      if (cache.shared) yield* cache.set(options.key, entry as unknown as Schema.Json, Duration.millis(keepMs))
    })

    /** Starts a load unless one runs or the last failure's wait is not over; the running load, if any. */
    const startIfDue = Effect.gen(function*() {
      if (loading !== undefined) return loading
      const now = yield* Clock.currentTimeMillis
      if (now < nextAttemptAt) return undefined
      const done = Deferred.makeUnsafe<void>()
      loading = done
      yield* Effect.forkIn(
        loadOnce.pipe(
          Effect.ensuring(Effect.suspend(() => {
            loading = undefined
            return Deferred.succeed(done, undefined)
          })),
          Effect.provideService(CurrentCharge, undefined)
        ),
        scope,
        { startImmediately: true }
      )
      return done
    })

    // The first load, at start; later ones when a read finds the copy due (served meanwhile).
    yield* startIfDue

    const get = (deadline: number): Effect.Effect<A | undefined> =>
      Effect.gen(function*() {
        const running = yield* startIfDue
        if (held !== undefined) return held.value
        if (running === undefined) return undefined
        const now = yield* Clock.currentTimeMillis
        yield* Deferred.await(running).pipe(Effect.timeoutOption(Duration.millis(Math.max(0, deadline - now))))
        // Set by the load meanwhile (TypeScript cannot see through the closure).
        return (held as Entry<A> | undefined)?.value
      })

    return {
      get,
      retryAfterSeconds: Effect.map(Clock.currentTimeMillis, (now) => Math.max(1, Math.ceil((nextAttemptAt - now) / 1000)))
    }
  })
