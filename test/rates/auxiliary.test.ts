/**
 * Auxiliary lists (auxiliary.ts): loaded at start, failures remembered with a doubling wait, the last
 * good copy served, reloaded when due while the held copy answers, a copy shared through the cache
 * adopted instead of fetched.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Option, Schema } from "effect"
import { TestClock } from "effect/testing"
import { makeAuxiliary } from "../../src/rates/auxiliary.ts"
import { CoinGeckoError } from "../../src/rates/coinGeckoResponses.ts"
import { RatesCache, type RatesCacheShape } from "../../src/rates/RatesCache.ts"
import { entryOf } from "../../src/rates/staleCache.ts"
import { ratesConfigFrom } from "./helpers.ts"

/** An upstream list whose answers the test scripts: a value, or "fail". */
const scripted = (answers: Array<ReadonlyArray<string> | "fail">) => {
  const state = { calls: 0 }
  const fetch = Effect.suspend(() => {
    const answer = answers[Math.min(state.calls++, answers.length - 1)]!
    return answer === "fail"
      ? Effect.fail(new CoinGeckoError({ kind: "transient", detail: "test: down", retryAfterSeconds: 0 }))
      : Effect.succeed(answer)
  })
  return { state, fetch }
}

/** A cache standing for Redis: `shared`, one map for every instance built on it. */
const sharedCache = () => {
  const entries = new Map<string, string>()
  const shape: RatesCacheShape = {
    get: (key) => Effect.sync(() => Option.map(Option.fromUndefinedOr(entries.get(key)), (json) => JSON.parse(json) as Schema.Json)),
    set: (key, value) => Effect.sync(() => void entries.set(key, JSON.stringify(value))),
    shared: true
  }
  return Layer.succeed(RatesCache)(shape)
}

const listOf = (fetch: Effect.Effect<ReadonlyArray<string>, CoinGeckoError>) =>
  makeAuxiliary({ name: "test list", key: "rates:v2:test", entry: entryOf(Schema.Array(Schema.String)), fetch, refreshEvery: Duration.hours(24) })

const config = ratesConfigFrom({ COINGECKO_AUX_RETRY_MS: "10000" })
const far = Date.now() + 60_000

describe("auxiliary lists", () => {
  it.effect("a failure is remembered: nothing is asked again before the wait, which doubles", () => {
    const upstream = scripted(["fail", "fail", ["usd"]])
    return Effect.gen(function*() {
      const list = yield* listOf(upstream.fetch)
      assert.strictEqual(upstream.state.calls, 1, "loaded at start")
      for (let i = 0; i < 20; i++) assert.isUndefined(yield* list.get(far))
      assert.strictEqual(upstream.state.calls, 1)
      assert.strictEqual(yield* list.retryAfterSeconds, 10)
      yield* TestClock.adjust("10 seconds")
      assert.isUndefined(yield* list.get(far))
      assert.strictEqual(upstream.state.calls, 2)
      assert.strictEqual(yield* list.retryAfterSeconds, 20)
      yield* TestClock.adjust("19 seconds")
      assert.isUndefined(yield* list.get(far))
      assert.strictEqual(upstream.state.calls, 2)
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* list.get(far), ["usd"])
      assert.strictEqual(upstream.state.calls, 3)
    }).pipe(Effect.provide(Layer.mergeAll(config, RatesCache.layerMemory())), Effect.scoped)
  })

  it.effect("reloads once a day, answering from the copy held meanwhile, and keeps it when the reload fails", () => {
    const upstream = scripted([["usd"], "fail", ["usd", "eur"]])
    return Effect.gen(function*() {
      const list = yield* listOf(upstream.fetch)
      assert.deepStrictEqual(yield* list.get(far), ["usd"])
      yield* TestClock.adjust("23 hours")
      assert.deepStrictEqual(yield* list.get(far), ["usd"])
      assert.strictEqual(upstream.state.calls, 1)
      yield* TestClock.adjust("2 hours")
      assert.deepStrictEqual(yield* list.get(far), ["usd"], "the last good copy while the reload fails")
      assert.strictEqual(upstream.state.calls, 2)
      yield* TestClock.adjust("10 seconds")
      yield* list.get(far)
      assert.deepStrictEqual(yield* list.get(far), ["usd", "eur"])
      assert.strictEqual(upstream.state.calls, 3)
    }).pipe(Effect.provide(Layer.mergeAll(config, RatesCache.layerMemory())), Effect.scoped)
  })

  it.effect("an instance adopts the copy another stored instead of fetching its own", () => {
    const first = scripted([["usd", "eur"]])
    const second = scripted([["never"]])
    return Effect.gen(function*() {
      const one = yield* listOf(first.fetch)
      assert.deepStrictEqual(yield* one.get(far), ["usd", "eur"])
      const two = yield* listOf(second.fetch)
      assert.deepStrictEqual(yield* two.get(far), ["usd", "eur"])
      assert.strictEqual(second.state.calls, 0)
    }).pipe(Effect.provide(Layer.mergeAll(config, sharedCache())), Effect.scoped)
  })

  it.effect("a request finding nothing held waits for the load running, until its deadline only", () => {
    const slow = { calls: 0 }
    const fetch = Effect.sleep("5 seconds").pipe(Effect.andThen(Effect.sync(() => (slow.calls++, ["usd"]))))
    return Effect.gen(function*() {
      const list = yield* listOf(fetch)
      const waiting = yield* Effect.forkChild(list.get(2_000))
      yield* TestClock.adjust("2 seconds")
      assert.isUndefined(yield* Fiber.join(waiting), "gave up at its deadline")
      yield* TestClock.adjust("3 seconds")
      assert.deepStrictEqual(yield* list.get(0), ["usd"], "the load went on and landed")
      assert.strictEqual(slow.calls, 1)
    }).pipe(Effect.provide(Layer.mergeAll(config, RatesCache.layerMemory())), Effect.scoped)
  })
})
