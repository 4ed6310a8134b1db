/**
 * Effect's RateLimiter over a shared store (Redis) that counts in this process while the store fails
 * or is slow: limits loosen to per-instance during an outage, but no request waits on it or fails
 * because of it. The outage and the recovery are logged once each.
 */
import { Duration, Effect } from "effect"
import { RateLimiter } from "effect/persistence"

type Consume = RateLimiter.RateLimiter["consume"]

const DEFAULT_STORE_TIMEOUT_MS = 250

export const consumeWithFallback = (options: {
  readonly shared: RateLimiter.RateLimiter
  readonly memory: RateLimiter.RateLimiter
  /** Names the limits in the log lines. */
  readonly label: string
  /** The limit this process keeps in memory meanwhile (default: the whole limit). */
  readonly share?: ((limit: number) => number) | undefined
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
          return yield* options.memory.consume(options.share === undefined ? consume : { ...consume, limit: options.share(consume.limit) })
        }))
    )
}
