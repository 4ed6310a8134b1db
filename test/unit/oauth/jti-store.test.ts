/**
 * Issue 34: a client assertion's jti is used once (JtiStore). In memory: refused again until `exp` + skew,
 * then forgotten; bounded. With Redis: what another instance recorded is refused here; while Redis fails,
 * this instance's memory still refuses its own replays (and the outage is logged once, not per request).
 */
import { Effect, Layer, Logger } from "effect"
import { Redis } from "effect/persistence"
import { describe, expect, it } from "vitest"
import { AppConfig } from "../../../src/config/AppConfig.ts"
import { JtiStore } from "../../../src/oauth/assertion/JtiStore.ts"
import { configFrom } from "../../support/config.ts"
import { makeFakeClock } from "../../support/oauth.ts"

const clock = makeFakeClock()
const config = AppConfig.layer.pipe(Layer.provide(configFrom({ REDIS_KEY_PREFIX: "t:" })))

/** A Redis whose SET answers what `answer` says (or fails), recording the commands. */
const fakeRedis = (answer: () => Effect.Effect<string | null, Redis.RedisError>) => {
  const commands: Array<ReadonlyArray<string>> = []
  const layer = Layer.succeed(Redis.Redis)(Redis.Redis.of({
    send: <A>(command: string, ...args: ReadonlyArray<string>) => {
      commands.push([command, ...args])
      return answer() as unknown as Effect.Effect<A, Redis.RedisError>
    },
    eval: () => () => Effect.die("unused"),
    reserve: Effect.die("unused"),
    subscribe: () => Effect.die("unused")
  }))
  return { commands, layer }
}

const claims = (
  layer: Layer.Layer<JtiStore, unknown>,
  calls: ReadonlyArray<readonly [string, string, number]>,
  logger: Layer.Layer<never> = Layer.empty
) =>
  Effect.runPromise(Effect.flatMap(JtiStore, (store) => Effect.forEach(calls, ([client, jti, until]) => store.claim(client, jti, until))).pipe(
    Effect.provide(layer),
    Effect.provide(Layer.merge(clock.layer, logger))
  ))

describe("JtiStore", () => {
  it("in memory: once per (client, jti) until the given time, then forgotten", async () => {
    const now = clock.now()
    const layer = JtiStore.layer
    const store = await Effect.runPromise(Effect.provide(JtiStore, layer))
    const claim = (client: string, jti: string, until: number) => Effect.runPromise(store.claim(client, jti, until).pipe(Effect.provide(clock.layer)))
    expect(await claim("a", "j1", now + 1000)).toBe(true)
    expect(await claim("a", "j1", now + 1000)).toBe(false)
    expect(await claim("b", "j1", now + 1000)).toBe(true) // another client's jti is its own
    clock.advance(1001)
    expect(await claim("a", "j1", clock.now() + 1000)).toBe(true)
  })

  it("with Redis: SET NX PX until the assertion's end; a jti Redis already holds (another instance's) is refused", async () => {
    const now = clock.now()
    const redis = fakeRedis(() => Effect.succeed(null))
    const results = await claims(JtiStore.layerRedis.pipe(Layer.provide(redis.layer), Layer.provide(config)), [["a", "seen-elsewhere", now + 90_000]])
    expect(results).toEqual([false])
    expect(redis.commands[0]).toEqual(["SET", expect.stringMatching(/^t:oauth-jti:[A-Za-z0-9_-]{43}$/), "1", "NX", "PX", "90000"])
  })

  it("while Redis fails: this instance's replays are still refused, and the outage is logged once", async () => {
    const warnings: Array<unknown> = []
    const redis = fakeRedis(() => Effect.fail(new Redis.RedisError({ cause: new Error("ECONNREFUSED") })))
    const logger = Logger.layer([Logger.make((options) => void warnings.push(options.message))])
    const now = clock.now()
    const results = await claims(
      JtiStore.layerRedis.pipe(Layer.provide(redis.layer), Layer.provide(config)),
      [["a", "j1", now + 60_000], ["a", "j1", now + 60_000], ["a", "j2", now + 60_000]],
      logger
    )
    expect(results).toEqual([true, false, true])
    expect(warnings.flat().filter((m) => String(m).includes("Redis failed"))).toHaveLength(1)
  })
})
