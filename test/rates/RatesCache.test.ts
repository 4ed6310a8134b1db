import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import { RatesCache } from "../../src/rates/RatesCache.ts"

describe("RatesCache.layerMemory", () => {
  it.effect("returns a value until its time-to-live has passed", () =>
    Effect.gen(function*() {
      const cache = yield* RatesCache
      yield* cache.set("k", { a: [1, 2] }, Duration.seconds(60))
      assert.deepStrictEqual(yield* cache.get("k"), Option.some({ a: [1, 2] }))
      yield* TestClock.adjust("59 seconds")
      assert.isTrue(Option.isSome(yield* cache.get("k")))
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isNone(yield* cache.get("k")))
    }).pipe(Effect.provide(RatesCache.layerMemory())))

  it.effect("hands out copies, as a remote store would", () =>
    Effect.gen(function*() {
      const cache = yield* RatesCache
      const value = { list: [1] }
      yield* cache.set("k", value, Duration.minutes(1))
      value.list.push(2)
      const read = yield* cache.get("k")
      assert.deepStrictEqual(read, Option.some({ list: [1] }))
    }).pipe(Effect.provide(RatesCache.layerMemory())))

  it.effect("stays within its capacity, dropping the least recently written keys", () =>
    Effect.gen(function*() {
      const cache = yield* RatesCache
      for (const key of ["a", "b", "c"]) yield* cache.set(key, key, Duration.minutes(1))
      yield* cache.set("a", "a2", Duration.minutes(1)) // rewritten: now the newest
      yield* cache.set("d", "d", Duration.minutes(1))
      assert.deepStrictEqual(
        yield* Effect.forEach(["a", "b", "c", "d"], (key) => cache.get(key)),
        [Option.some("a2"), Option.none(), Option.some("c"), Option.some("d")]
      )
    }).pipe(Effect.provide(RatesCache.layerMemory({ capacity: 3 }))))
})
