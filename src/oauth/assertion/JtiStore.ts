/**
 * Client assertions are used once (RFC 7523 §3 item 7, CONTRACT C6): each (client, `jti`) is remembered
 * until the assertion could no longer be accepted anyway (its `exp` plus the clock skew tolerated), and a
 * second use within that time is refused.
 *
 * In this process by default; with REDIS_URL in Redis too (`SET NX PX`, the key a digest of client and
 * jti), so that an assertion used at one instance is refused at every other. This process's memory is
 * asked first and always written, so that while Redis fails (or answers slowly: 250 ms) replays at this
 * instance stay refused (the outage is logged once, as the failure limits do).
 *
 * Memory is bounded: 100,000 entries, expired ones dropped first. When that many live assertions are
 * held (only clients holding private keys can make them) new ones are refused, never an old one forgotten.
 */
import { createHash } from "node:crypto"
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import { AppConfig } from "../../config/AppConfig.ts"

const MAX_ENTRIES = 100_000
const REDIS_TIMEOUT = Duration.millis(250)

export interface JtiStoreShape {
  /** `true` the first time (client, jti) is seen before `untilMs`; it is then remembered until `untilMs`. */
  readonly claim: (clientId: string, jti: string, untilMs: number) => Effect.Effect<boolean>
}

const keyOf = (clientId: string, jti: string) =>
  createHash("sha256").update(clientId).update("\u0000").update(jti).digest("base64url")

const makeMemory = () => {
  const until = new Map<string, number>()
  let warnedFull = false
  const sweep = (now: number) => {
    for (const [key, expiry] of until) if (expiry <= now) until.delete(key)
  }
  return (key: string, untilMs: number): Effect.Effect<boolean> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const held = until.get(key)
      if (held !== undefined && held > now) return Effect.succeed(false)
      if (until.size >= MAX_ENTRIES) sweep(now)
      if (until.size >= MAX_ENTRIES) {
        if (warnedFull) return Effect.succeed(false)
        warnedFull = true
        return Effect.as(Effect.logWarning(`oauth: ${MAX_ENTRIES} client assertions held; new ones are refused until some expire`), false)
      }
      warnedFull = false
      until.set(key, untilMs)
      return Effect.succeed(true)
    })
}

export class JtiStore extends Context.Service<JtiStore, JtiStoreShape>()("app/oauth/JtiStore") {
  /** In this process. */
  static readonly layer: Layer.Layer<JtiStore> = Layer.sync(JtiStore, () => {
    const memory = makeMemory()
    return { claim: (clientId, jti, untilMs) => memory(keyOf(clientId, jti), untilMs) }
  })

  /** Shared by every instance on the same Redis and REDIS_KEY_PREFIX; this process's memory as well. */
  static readonly layerRedis: Layer.Layer<JtiStore, never, AppConfig | Redis.Redis> = Layer.effect(
    JtiStore,
    Effect.gen(function*() {
      const { redisKeyPrefix } = yield* AppConfig
      const redis = yield* Redis.Redis
      const memory = makeMemory()
      let degraded = false
      const shared = (key: string, untilMs: number) =>
        Effect.gen(function*() {
          const ttl = Math.max(1, untilMs - (yield* Clock.currentTimeMillis))
          const set = yield* redis.send<string | null>("SET", `${redisKeyPrefix}oauth-jti:${key}`, "1", "NX", "PX", String(ttl))
          return set === "OK"
        }).pipe(
          Effect.timeoutOrElse({ duration: REDIS_TIMEOUT, orElse: () => Effect.fail("no answer within 250 ms") }),
          Effect.tap(() =>
            degraded ? Effect.andThen(Effect.sync(() => (degraded = false)), Effect.logInfo("oauth assertion replay store: Redis is back")) : Effect.void
          ),
          // Redis away: this process's memory has already refused what it saw.
          Effect.catch((error) =>
            degraded
              ? Effect.succeed(true)
              : Effect.andThen(
                Effect.sync(() => (degraded = true)),
                Effect.as(Effect.logWarning("oauth assertion replay store: Redis failed, replays refused per instance", String(error)), true)
              )
          )
        )
      return {
        claim: (clientId, jti, untilMs) => {
          const key = keyOf(clientId, jti)
          return Effect.flatMap(memory(key, untilMs), (fresh) => (fresh ? shared(key, untilMs) : Effect.succeed(false)))
        }
      }
    })
  )
}
