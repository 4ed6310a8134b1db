/**
 * Single-flight: concurrent callers asking for the same key share one execution (CONTRACT C4:
 * "concurrent identical misses share one upstream call").
 *
 * The shared work runs in its own fiber, owned by the scope the group was made in (the Layer's), so a
 * caller that gives up (deadline, client went away) neither cancels the others nor wastes the call: the
 * result still lands wherever the work puts it (our cache).
 */
import { Deferred, Effect, type Scope } from "effect"

export interface SingleFlight {
  readonly run: <A, E>(key: string, work: Effect.Effect<A, E>) => Effect.Effect<A, E>
  /** Keys being worked on right now (for tests and diagnostics). */
  readonly inFlight: () => number
}

export const makeSingleFlight: Effect.Effect<SingleFlight, never, Scope.Scope> = Effect.gen(function*() {
  const scope = yield* Effect.scope
  // Values are Deferreds of whatever the work for that key yields; keys are namespaced by the callers.
  const flights = new Map<string, Deferred.Deferred<unknown, unknown>>()

  const run = <A, E>(key: string, work: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      const existing = flights.get(key) as Deferred.Deferred<A, E> | undefined
      if (existing !== undefined) return Deferred.await(existing)
      const deferred = Deferred.makeUnsafe<A, E>()
      // Registered synchronously, before any yield, so a second caller in the same tick finds it.
      flights.set(key, deferred as Deferred.Deferred<unknown, unknown>)
      // Unregister before waking the waiters: a caller arriving after this flight ended must start a new
      // one, never be handed this (possibly failed) result. Runs on success, failure and interruption.
      const shared = Effect.onExit(work, (exit) =>
        Effect.suspend(() => {
          if (flights.get(key) === deferred) flights.delete(key)
          return Deferred.done(deferred, exit)
        }))
      return Effect.forkIn(shared, scope, { startImmediately: true }).pipe(
        Effect.andThen(Deferred.await(deferred))
      )
    })

  return { run, inFlight: () => flights.size }
})
