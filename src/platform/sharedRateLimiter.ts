/**
 * Effect's RateLimiter over a shared store (Redis) that counts in this process while the store fails
 * or is slow: each process then keeps its share of every limit (or the whole of it), but no request
 * waits on it or fails because of it. The outage and the recovery are logged once each.
 */
import { Duration, Effect } from "effect"
import { RateLimiter } from "effect/persistence"
import type { ProcessCountShape } from "./processCount/ProcessCount.ts"

type Consume = RateLimiter.RateLimiter["consume"]
type ConsumeOptions = Parameters<Consume>[0]

const DEFAULT_STORE_TIMEOUT_MS = 250

/**
 * One of `processes` processes' share of a limit they share: the limit over them, in whole calls; under one call a
 * window, one call in a window as many times longer (10 a second over 12 processes: one every 1.2 s each).
 */
export const processShare = <C extends ConsumeOptions>(consume: C, processes: number): C => {
  const each = consume.limit / Math.max(1, processes)
  return each >= 1
    ? { ...consume, limit: Math.floor(each) }
    : { ...consume, limit: 1, window: Duration.millis(Math.ceil(Duration.toMillis(Duration.fromInputUnsafe(consume.window)) / each)) }
}

export const consumeWithFallback = (options: {
  readonly shared: RateLimiter.RateLimiter
  readonly memory: RateLimiter.RateLimiter
  /** Names the limits in the log lines. */
  readonly label: string
  /** The processes sharing the limits: this one keeps its share of each meanwhile (`processShare`; default: the whole). */
  readonly processes?: ProcessCountShape | undefined
  /** A store round trip slower than this counts as an outage for that call (default 250 ms). */
  readonly storeTimeoutMs?: number | undefined
}): Consume => {
  const storeTimeout = Duration.millis(options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS)
  let degraded = false
  const storeFailure = (message: string) =>
    new RateLimiter.RateLimiterError({ reason: new RateLimiter.RateLimitStoreError({ message }) })
  return (consume) =>
    options.shared.consume(consume).pipe(
      Effect.timeoutOrElse({ duration: storeTimeout, orElse: () => Effect.fail(storeFailure("store timed out")) }),
      Effect.tap(() =>
        degraded
          ? Effect.sync(() => (degraded = false)).pipe(Effect.andThen(Effect.logInfo(`${options.label}: shared store is back`)))
          : Effect.void
      ),
      Effect.catchReason("RateLimiterError", "RateLimitStoreError", (error) =>
        Effect.gen(function*() {
          if (!degraded) {
            degraded = true
            yield* Effect.logWarning(`${options.label}: shared store failed, counting in memory`, error.message)
          }
          return yield* options.memory.consume(options.processes === undefined ? consume : processShare(consume, options.processes.current()))
        }))
    )
}
