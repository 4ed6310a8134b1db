/**
 * What happens when Redis is down (CONTRACT C2), for everything the rates capability shares through it: this process
 * carries it on alone, never without its bound, and the service keeps answering. A Redis call not answered within
 * `STORE_BOUND_MS` counts as failed, for that call only (Redis is asked again on the next).
 *   - Held copies (copies/CopyStore.ts, through `whenStoreFails`): a read is what this process last read or wrote of
 *     the key; a write is kept here only; a shared load's lease not answered is asked again, and after four such
 *     claims in a row each instance loads a list alone, at once a request's copy (CopyStore.ts `underLease`).
 *   - The minute's buckets (CoinGecko's calls a minute, Coinbase's 10 a second: `layerGuardStoresRedis`): this
 *     process's share of each limit (over the processes last seen sharing Redis: platform/processCount), in memory.
 *   - The breakers (`layerGuardStoresRedis`): Effect's CircuitBreaker admits the calls its store cannot record.
 *   - CoinGecko's month of credits (coingecko/credits/MonthlyBudget.ts): this process's own ledger, empty at first,
 *     filling at its share of the month's pace (`shareOf`, the same count), added to the shared one afterwards.
 *   - Coinbase's feed (src/platform/leadership/redis.ts): each instance holds a connection of its own.
 */
import { Duration, Effect, Layer } from "effect"
import { CircuitBreaker, RateLimiter } from "effect/persistence"
import { ProcessCount, type ProcessCountShape } from "../platform/processCount/ProcessCount.ts"
import { consumeWithFallback } from "../platform/sharedRateLimiter.ts"

const STORE_BOUND_MS = 250
/** Claims of a shared load's lease not answered in a row, after which this instance loads alone: a list's loads are few
 * and cost credits a small plan may lack; a request waits for its copy. */
export const UNANSWERED_CLAIMS_ALONE = { list: 4, copy: 1 } as const

/** `effect`, a Redis call, within the bound; else (failed or late) `fallback`'s answer, logged. */
export const whenStoreFails = <A, E>(what: string, effect: Effect.Effect<A, E>, fallback: () => A): Effect.Effect<A> =>
  effect.pipe(
    Effect.timeoutOrElse({ duration: Duration.millis(STORE_BOUND_MS), orElse: () => Effect.fail(`no answer within ${STORE_BOUND_MS} ms`) }),
    Effect.catch((error) => Effect.as(Effect.logWarning(`rates cache: Redis ${what} failed; carrying on without it`, String(error)), undefined).pipe(Effect.map(fallback)))
  )

/** A limiter over `shared` that counts this process's share of each limit in memory while `shared` fails. */
export const limiterOrShare = (shared: RateLimiter.RateLimiter, processes: ProcessCountShape): Effect.Effect<RateLimiter.RateLimiter> =>
  Effect.map(RateLimiter.make.pipe(Effect.provide(RateLimiter.layerStoreMemory)), (memory) => ({
    ...shared,
    consume: consumeWithFallback({ shared, memory, label: "rates: upstream budget", processes, storeTimeoutMs: STORE_BOUND_MS })
  }))

/** The sources' buckets and breakers shared by every instance through Redis, under `prefix`, as above when it fails. */
export const layerGuardStoresRedis = (options: { readonly prefix: string }) =>
  Layer.mergeAll(
    Layer.effect(
      RateLimiter.RateLimiter,
      Effect.flatMap(RateLimiter.make.pipe(Effect.provide(RateLimiter.layerStoreRedis({ prefix: `${options.prefix}ratelimiter:` }))), (shared) =>
        Effect.flatMap(Effect.service(ProcessCount), (processes) => limiterOrShare(shared, processes)))
    ),
    CircuitBreaker.layerStoreRedis({ prefix: `${options.prefix}circuitbreaker:` })
  )
