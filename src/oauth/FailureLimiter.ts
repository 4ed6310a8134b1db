/**
 * Brute-force limits of the token endpoint (CONTRACT C6, RFC 6749 §10.10). Failed client
 * authentications are counted per (address, client) pair, `limit` per window, and per address, ten
 * times that (addresses are counted as the request limits count them: IPv6 per /64). A pair at its
 * limit refuses that client from that address, the right secret included; an address at its limit
 * refuses every client from it. Never per client alone: secrets have 256 bits, so a per-client
 * lockout would only lend anyone who knows a client id a denial of service.
 *
 * Counted with Effect's RateLimiter (the request limits' fixed window, src/http/rateLimit.ts): in
 * memory, or with REDIS_URL in Redis so that every instance sees the same counts, in memory while
 * Redis fails (src/platform/sharedRateLimiter.ts).
 */
import { createHash } from "node:crypto"
import { Duration, Context, Effect, Layer } from "effect"
import { RateLimiter, type Redis } from "effect/persistence"
import { AppConfig } from "../config/AppConfig.ts"
import { addressBucket } from "../http/clientIp.ts"
import { makeMemoryCounterStore } from "../http/rateLimit.ts"
import { consumeWithFallback } from "../platform/sharedRateLimiter.ts"
import { OAuthConfig } from "./OAuthConfig.ts"

/** An address may fail this many times the per-client limit: clients behind one NAT fail apart. */
const ADDRESS_FACTOR = 10

type FailurePolicy = "oauth-address-failures" | "oauth-client-failures"

/** A limit reached: named for the RateLimit fields of the 429. */
export interface Blocked {
  readonly policy: FailurePolicy
  readonly limit: number
  readonly retryAfterSeconds: number
}

export interface FailureLimiterShape {
  readonly windowSeconds: number
  /** The address's limit, when reached. */
  readonly addressBlocked: (address: string) => Effect.Effect<Blocked | undefined>
  /** The (address, client) pair's limit, when reached. */
  readonly clientBlocked: (address: string, clientId: string) => Effect.Effect<Blocked | undefined>
  /** One failure from `address`, and for its pair with `clientId` when the request named a client. */
  readonly recordFailure: (address: string, clientId?: string) => Effect.Effect<void>
}

type Consume = RateLimiter.RateLimiter["consume"]

export class FailureLimiter extends Context.Service<FailureLimiter, FailureLimiterShape>()("app/oauth/FailureLimiter") {
  /** In this process: `OAUTH_MAX_FAILURES_PER_MIN` failures per pair per minute. */
  static readonly layer: Layer.Layer<FailureLimiter, never, OAuthConfig> = Layer.effect(
    FailureLimiter,
    Effect.gen(function*() {
      const { maxFailuresPerMinute } = yield* OAuthConfig
      return makeFailureLimiter((yield* memoryLimiter).consume, { limit: maxFailuresPerMinute, windowSeconds: 60 })
    })
  )

  /** Shared by every instance on the same Redis and REDIS_KEY_PREFIX. */
  static readonly layerRedis: Layer.Layer<FailureLimiter, never, OAuthConfig | AppConfig | Redis.Redis> = Layer.effect(
    FailureLimiter,
    Effect.gen(function*() {
      const { maxFailuresPerMinute } = yield* OAuthConfig
      const { redisKeyPrefix } = yield* AppConfig
      const shared = yield* RateLimiter.make.pipe(
        Effect.provide(RateLimiter.layerStoreRedis({ prefix: `${redisKeyPrefix}oauth-failures:` }))
      )
      const consume = consumeWithFallback({ shared, memory: yield* memoryLimiter, label: "token failure limits" })
      return makeFailureLimiter(consume, { limit: maxFailuresPerMinute, windowSeconds: 60 })
    })
  )

  /** In memory with explicit limits, on the Effect Clock (tests move it). */
  static readonly layerTest = (options: { readonly limit: number; readonly windowSeconds: number }) =>
    Layer.effect(FailureLimiter, Effect.map(memoryLimiter, ({ consume }) => makeFailureLimiter(consume, options)))
}

/** The request limits' memory store: its counters are dropped once their window is over. */
const memoryLimiter = Effect.gen(function*() {
  const { store } = yield* makeMemoryCounterStore
  return yield* RateLimiter.make.pipe(Effect.provideService(RateLimiter.RateLimiterStore, store))
})

/** Client ids are the caller's text, of any length: the key holds a digest of it. */
const clientKey = (clientId: string) => createHash("sha256").update(clientId).digest("base64url")

export const makeFailureLimiter = (
  consume: Consume,
  options: { readonly limit: number; readonly windowSeconds: number }
): FailureLimiterShape => {
  const window = Duration.seconds(options.windowSeconds)
  const counter = (policy: FailurePolicy, key: string, limit: number) => ({ policy, key, limit })
  const ofAddress = (address: string) => counter("oauth-address-failures", `address:${addressBucket(address)}`, options.limit * ADDRESS_FACTOR)
  const ofPair = (address: string, clientId: string) =>
    counter("oauth-client-failures", `pair:${addressBucket(address)}:${clientKey(clientId)}`, options.limit)

  // Zero tokens: reads the count without adding to it.
  const blocked = ({ policy, key, limit }: ReturnType<typeof counter>) =>
    consume({ key, limit, window, tokens: 0 }).pipe(
      Effect.map((r): Blocked | undefined =>
        r.remaining > 0 ? undefined : { policy, limit, retryAfterSeconds: Math.max(1, Math.ceil(Duration.toMillis(r.resetAfter) / 1000)) }
      ),
      // Only a store failure without a fallback gets here: let the request through rather than fail it.
      Effect.orElseSucceed(() => undefined)
    )
  const count = ({ key, limit }: ReturnType<typeof counter>) => Effect.ignore(consume({ key, limit, window }))

  return {
    windowSeconds: options.windowSeconds,
    addressBlocked: (address) => blocked(ofAddress(address)),
    clientBlocked: (address, clientId) => blocked(ofPair(address, clientId)),
    recordFailure: (address, clientId) =>
      Effect.asVoid(Effect.all(
        clientId === undefined ? [count(ofAddress(address))] : [count(ofAddress(address)), count(ofPair(address, clientId))],
        { concurrency: "unbounded" }
      ))
  }
}
