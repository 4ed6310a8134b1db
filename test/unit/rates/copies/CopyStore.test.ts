import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option } from "effect"
import { Redis } from "effect/persistence"
import { TestClock } from "effect/testing"
import { CopyStore } from "../../../../src/rates/copies/CopyStore.ts"

describe("CopyStore.layerMemory", () => {
  it.effect("returns a value until its time-to-live has passed", () =>
    Effect.gen(function*() {
      const cache = yield* CopyStore
      yield* cache.set("k", { a: [1, 2] }, Duration.seconds(60))
      assert.deepStrictEqual(yield* cache.get("k"), Option.some({ a: [1, 2] }))
      yield* TestClock.adjust("59 seconds")
      assert.isTrue(Option.isSome(yield* cache.get("k")))
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isNone(yield* cache.get("k")))
    }).pipe(Effect.provide(CopyStore.layerMemory())))

  it.effect("hands out copies, as a remote store would", () =>
    Effect.gen(function*() {
      const cache = yield* CopyStore
      const value = { list: [1] }
      yield* cache.set("k", value, Duration.minutes(1))
      value.list.push(2)
      const read = yield* cache.get("k")
      assert.deepStrictEqual(read, Option.some({ list: [1] }))
    }).pipe(Effect.provide(CopyStore.layerMemory())))

  it.effect("stays within its capacity, dropping the least recently used keys", () =>
    Effect.gen(function*() {
      const cache = yield* CopyStore
      for (const key of ["a", "b", "c"]) yield* cache.set(key, key, Duration.minutes(1))
      yield* cache.get("a") // used: now the newest
      yield* cache.set("d", "d", Duration.minutes(1))
      assert.deepStrictEqual(
        yield* Effect.forEach(["a", "b", "c", "d"], (key) => cache.get(key)),
        [Option.some("a"), Option.none(), Option.some("c"), Option.some("d")]
      )
    }).pipe(Effect.provide(CopyStore.layerMemory({ maxEntries: 3 }))))

  it.effect("keeps negative answers apart: a flood of them never evicts data", () => {
    const store = CopyStore.makeMemory({ maxBytes: 10_000, negativeEntries: 100 })
    return Effect.gen(function*() {
      yield* store.set("rates:v2:chart:bitcoin:usd", { points: [1, 2, 3] }, Duration.hours(1))
      for (let i = 0; i < 10_000; i++) yield* store.set(`rates:v2:chart:junk-${i}:usd`, null, Duration.hours(1), { negative: true })
      assert.isTrue(Option.isSome(yield* store.get("rates:v2:chart:bitcoin:usd")))
      assert.isTrue(Option.isSome(yield* store.get("rates:v2:chart:junk-9999:usd")))
      assert.isTrue(Option.isNone(yield* store.get("rates:v2:chart:junk-0:usd")))
      assert.deepStrictEqual(store.size().negative.entries, 100)
      assert.deepStrictEqual(store.size().data.entries, 1)
    })
  })

  it.effect("is bounded in bytes of JSON, whatever the number of entries", () => {
    const store = CopyStore.makeMemory({ maxBytes: 50_000 })
    return Effect.gen(function*() {
      const series = Array.from({ length: 365 }, (_, i) => [1_700_000_000_000 + i * 86_400_000, 1234.5678 + i])
      for (let i = 0; i < 100; i++) {
        yield* store.set(`rates:v2:chart:coin-${i}:usd`, series, Duration.hours(1))
        yield* store.get("rates:v2:chart:coin-0:usd") // the popular one
        assert.isAtMost(store.size().data.bytes, 50_000)
      }
      assert.isTrue(Option.isSome(yield* store.get("rates:v2:chart:coin-0:usd")), "used, so kept")
      assert.isTrue(Option.isNone(yield* store.get("rates:v2:chart:coin-1:usd")))
      assert.isTrue(Option.isSome(yield* store.get("rates:v2:chart:coin-99:usd")))
    })
  })
})

describe("CopyStore.layerRedis while Redis is away", () => {
  // A Redis that answers until `down`, then fails every command, as a lost connection does.
  const flakyRedis = () => {
    const values = new Map<string, string>()
    let down = false
    const refused = () => new Redis.RedisError({ cause: new Error("connection refused") })
    const layer = Layer.succeed(Redis.Redis)(Redis.Redis.of({
      send: <A>(command: string, ...args: ReadonlyArray<string>) =>
        down
          ? Effect.fail(refused())
          : Effect.sync(() => {
            if (command === "GET") return (values.get(args[0]!) ?? null) as A
            if (command === "SET") values.set(args[0]!, args[1]!)
            return "OK" as A
          }),
      eval: () => () => Effect.fail(refused()),
      subscribe: () => Effect.die("not used"),
      reserve: Effect.die("not used")
    }))
    return { layer, setDown: (value: boolean) => void (down = value) }
  }

  it.effect("serves what this process last read or wrote of a key, and keeps what it writes meanwhile; a key it never saw is a miss", () => {
    const redis = flakyRedis()
    return Effect.gen(function*() {
      const store = yield* CopyStore
      yield* store.set("read", { price: 1 }, Duration.minutes(1))
      yield* store.get("read")
      redis.setDown(true)
      assert.deepStrictEqual(yield* store.get("read"), Option.some({ price: 1 }))
      yield* store.set("written", { price: 2 }, Duration.minutes(1))
      assert.deepStrictEqual(yield* store.get("written"), Option.some({ price: 2 }))
      assert.isTrue(Option.isNone(yield* store.get("never")))
      redis.setDown(false)
      assert.isTrue(Option.isNone(yield* store.get("written")), "Redis back: Redis' answer again (the write was lost with it)")
    }).pipe(Effect.provide(CopyStore.layerRedis().pipe(Layer.provide(redis.layer))))
  })
})
