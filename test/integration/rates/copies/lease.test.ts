/**
 * A shared load's lease over a real Redis (copies/Copies.ts `underLease`, CopyStore.ts `claim`), in real time: a claim
 * answered after the store's bound (a busy process, a slow Redis) is not a lease held here, so an instance whose claim
 * was late does not load what another is loading (a small plan's start-up: test/integration/scale/rates-state.test.ts finding 4
 * failed so in CI); a lease taken by a late answer is found its own; a Redis that answers nothing lets each load alone;
 * a load that outlasts the lease keeps it (renewed), so another instance waits for its copy instead of loading again.
 */
import { NodeRedis } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Schema } from "effect"
import type { Redis } from "effect/persistence"
import { CopyStore } from "../../../../src/rates/copies/CopyStore.ts"
import { makeCopies, makeHeldList } from "../../../../src/rates/copies/Copies.ts"
import { freshFor } from "../../../../src/rates/copies/entry.ts"
import { Charge, spendingUntil } from "../../../../src/rates/upstream.ts"
import { aroundRedis, refusingRedis } from "../../../support/redis.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** Commands sent before `until` (epoch ms) are carried out at once but answered `lateMs` late, past the store's 250 ms. */
const stalledUntil = (until: number, lateMs = 300) =>
  aroundRedis((command) => Effect.suspend(() => Date.now() < until ? Effect.tap(command, () => Effect.sleep(Duration.millis(lateMs))) : command))

/** One instance's list, loaded through its own store; `loadMs`: how long its source takes. */
const instance = (prefix: string, redis: Layer.Layer<Redis.Redis, Redis.RedisError>, loadMs: number) =>
  Effect.gen(function*() {
    const calls = { count: 0 }
    const context = yield* Layer.build(CopyStore.layerRedis({ prefix }).pipe(Layer.provide(redis)))
    const list = yield* makeHeldList<ReadonlyArray<string>>({
      name: "test list",
      source: "coingecko",
      key: "rates:v2:lease-test",
      value: Schema.Array(Schema.String),
      load: Effect.sleep(Duration.millis(loadMs)).pipe(Effect.andThen(Effect.sync(() => (calls.count++, ["usd", "eur"])))),
      reload: { everyMs: 86_400_000, lastGoodMs: 86_400_000 },
      retry: { firstMs: 10_000 }
    }).pipe(Effect.provide(context))
    yield* Effect.forkScoped(list.warm)
    const get = list.get.pipe(spendingUntil(Date.now() + 10_000), Effect.option)
    return { calls, get }
  })

const connection = NodeRedis.layer({ url: redisUrl })
const prefixOf = (name: string) => `test-lease-${name}-${process.pid}-${Date.now()}:`

describe("a shared load's lease over Redis", () => {
  it.live("an instance whose claim is answered late adopts the copy another is loading instead of loading again", () =>
    Effect.gen(function*() {
      const prefix = prefixOf("late")
      const first = yield* instance(prefix, connection, 1_000)
      yield* Effect.sleep("200 millis")
      // The second instance starts busy: for 600 ms its commands are answered late.
      const second = yield* instance(prefix, stalledUntil(Date.now() + 600).pipe(Layer.provide(connection)), 1_000)
      yield* Effect.sleep("2500 millis")
      assert.deepStrictEqual(yield* second.get, yield* first.get)
      assert.strictEqual(first.calls.count, 1)
      assert.strictEqual(second.calls.count, 0, "one load for the instances sharing the store (a small plan's credits hold one)")
    }).pipe(Effect.scoped))

  it.live("a lease taken by a claim answered late is found its own on the next claim: loaded at once, not after the lease", () =>
    Effect.gen(function*() {
      const started = Date.now()
      const only = yield* instance(prefixOf("own"), stalledUntil(Date.now() + 400).pipe(Layer.provide(connection)), 100)
      yield* Effect.sleep("2 seconds")
      assert.strictEqual(only.calls.count, 1)
      assert.isTrue((yield* only.get)._tag === "Some")
      assert.isBelow(Date.now() - started, 5_000)
    }).pipe(Effect.scoped))

  it.live("with Redis down, each instance loads alone within seconds", () =>
    Effect.gen(function*() {
      const one = yield* instance(prefixOf("down"), refusingRedis, 100)
      const two = yield* instance(prefixOf("down"), refusingRedis, 100)
      yield* Effect.sleep("3 seconds")
      assert.deepStrictEqual([one.calls.count, two.calls.count], [1, 1])
      assert.isTrue((yield* two.get)._tag === "Some")
    }).pipe(Effect.scoped))

  /** Copies of numbers over Redis under `prefix`, with a lease of `leaseMs`; `fetch` as the test has it answer. */
  const copiesOver = (prefix: string, leaseMs: number, fetch: (keys: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<readonly [string, number]>>) =>
    Effect.gen(function*() {
      const context = yield* Layer.build(CopyStore.layerRedis({ prefix }).pipe(Layer.provide(connection)))
      return yield* makeCopies<number>({
        name: "tickers",
        source: "coinbase",
        value: Schema.Finite,
        timing: () => freshFor(Duration.minutes(1)),
        fetch,
        onFailure: { lastGoodMs: 0, retryMs: 1_000 },
        loadLeaseMs: leaseMs
      }).pipe(Effect.provide(context))
    })
  const charge = Charge.request("ip:192.0.2.1")
  const readWithin = (copies: Effect.Success<ReturnType<typeof copiesOver>>, ms: number) =>
    copies.get("btc").pipe(spendingUntil(Date.now() + ms, charge), Effect.map((served) => served.value))

  it.live("a load longer than its lease keeps the lease: the other instance waits for its copy, one call in all", () =>
    Effect.gen(function*() {
      const prefix = prefixOf("renewed")
      const calls: Array<string> = []
      // A 600 ms lease and a fetch of 2 s: unrenewed, the lease expires mid-load and the second instance loads too.
      const fetch = (keys: ReadonlyArray<string>) =>
        Effect.sleep("2 seconds").pipe(Effect.andThen(Effect.sync(() => (calls.push(...keys), keys.map((key) => [key, key.length] as const)))))
      const [a, b] = yield* Effect.all([copiesOver(prefix, 600, fetch), copiesOver(prefix, 600, fetch)])
      const first = yield* Effect.forkChild(readWithin(a, 10_000), { startImmediately: true })
      yield* Effect.sleep("100 millis")
      const second = yield* readWithin(b, 10_000)
      assert.deepStrictEqual([yield* Fiber.join(first), second], [3, 3])
      assert.deepStrictEqual(calls, ["btc"], "one fetch while the first instance's load outlasts its lease")
    }).pipe(Effect.scoped))

  it.live("a load that never ends holds its lease five leases at most: then one other instance loads under it, the rest adopt its copy", () =>
    Effect.gen(function*() {
      const prefix = prefixOf("hung")
      const calls: Array<string> = []
      // The first fetch never answers; later ones at once.
      const fetch = (keys: ReadonlyArray<string>) =>
        Effect.suspend(() => {
          calls.push(...keys)
          return calls.length === 1 ? Effect.never : Effect.succeed(keys.map((key) => [key, key.length] as const))
        })
      const [a, b, c] = yield* Effect.all([copiesOver(prefix, 1_000, fetch), copiesOver(prefix, 1_000, fetch), copiesOver(prefix, 1_000, fetch)])
      yield* Effect.forkChild(Effect.exit(readWithin(a, 1_000)), { startImmediately: true })
      yield* Effect.sleep("200 millis")
      const started = Date.now()
      const [fromB, fromC] = yield* Effect.all([readWithin(b, 15_000), readWithin(c, 15_000)], { concurrency: 2 })
      assert.deepStrictEqual([fromB, fromC], [3, 3])
      // Renewed forever, the lease kept both waiting until they gave up, and each then loaded alone: three fetches.
      assert.deepStrictEqual(calls, ["btc", "btc"], "the hung load, then one other under the lease")
      assert.isAtLeast(Date.now() - started, 3_500, "the lease held past its second while the first load ran")
    }).pipe(Effect.scoped), 30_000)
})
