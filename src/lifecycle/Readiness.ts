/**
 * Whether this instance can serve (CONTRACT C3): not while it drains after SIGTERM, nor while a
 * dependency it was configured with (Redis; PostgreSQL) is unreachable. A dependency adds its own check
 * with `addCheck`; `/readyz` (src/http/probes.ts) answers from `status`.
 */
import { Context, Duration, Effect, Layer, type Scope } from "effect"

/** A dependency's check: succeeds when it is usable; fails with what is wrong, in a few words. */
export type ReadinessCheck = Effect.Effect<void, string>

export type ReadinessStatus =
  | { readonly ready: true }
  | { readonly ready: false; readonly reasons: ReadonlyArray<string> }

/** A check that has not answered within this is failing: a probe must answer quickly. */
const checkTimeout = Duration.seconds(1)

export class Readiness extends Context.Service<Readiness, {
  /** From now on the instance is not ready: it is stopping (called when draining begins). */
  readonly startDraining: () => void
  readonly isDraining: () => boolean
  /** Adds `check` under `name` for as long as the calling scope lives. */
  readonly addCheck: (name: string, check: ReadinessCheck) => Effect.Effect<void, never, Scope.Scope>
  /** Runs every check at once. */
  readonly status: Effect.Effect<ReadinessStatus>
}>()("app/Readiness") {
  static readonly layer: Layer.Layer<Readiness> = Layer.sync(Readiness, () => {
    let draining = false
    const checks = new Map<string, ReadinessCheck>()
    return Readiness.of({
      startDraining: () => void (draining = true),
      isDraining: () => draining,
      addCheck: (name, check) =>
        Effect.acquireRelease(Effect.sync(() => void checks.set(name, check)), () => Effect.sync(() => checks.delete(name))),
      status: Effect.suspend(() => {
        if (draining) return Effect.succeed<ReadinessStatus>({ ready: false, reasons: ["draining: the process is stopping"] })
        return Effect.forEach(
          [...checks],
          ([name, check]) =>
            check.pipe(
              Effect.timeoutOrElse({ duration: checkTimeout, orElse: () => Effect.fail("no answer within 1 s") }),
              Effect.match({ onSuccess: () => undefined, onFailure: (reason) => `${name}: ${reason}` })
            ),
          { concurrency: "unbounded" }
        ).pipe(Effect.map((results): ReadinessStatus => {
          const reasons = results.filter((r): r is string => r !== undefined)
          return reasons.length === 0 ? { ready: true } : { ready: false, reasons }
        }))
      })
    })
  })
}
