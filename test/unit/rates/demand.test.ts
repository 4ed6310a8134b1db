/**
 * Who asks which currency (RatesDemand, src/rates/coingecko/latestPrices.ts): one caller, one share, split evenly over the currencies it
 * asked within the window; forgotten after it; bounded in callers, currencies per caller and pairs; and one
 * instance, on Effect's Clock, when its layer is provided in two places of one build.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { makeRatesDemand, RatesDemand, type RatesDemandShape } from "../../../src/rates/coingecko/latestPrices.ts"

const T0 = Date.parse("2026-11-25T12:00:00Z")
const MINUTE = 60_000

const setUp = (options: Parameters<typeof makeRatesDemand>[1] = {}) => {
  const clock = { now: T0 }
  return { clock, demand: makeRatesDemand(() => clock.now, options) }
}

describe("RatesDemand", () => {
  it("weighs each caller 1, split evenly over the currencies it asks", () => {
    const { demand } = setUp()
    demand.note("ip:198.51.100.1", "usd")
    demand.note("ip:198.51.100.1", "eur")
    demand.note("ip:198.51.100.2", "usd")
    for (const currency of ["usd", "eur", "gbp", "jpy"]) demand.note("client:svc", currency)
    assert.deepStrictEqual(demand.weights(), {
      weights: new Map([["usd", 0.5 + 1 + 0.25], ["eur", 0.5 + 0.25], ["gbp", 0.25], ["jpy", 0.25]]),
      callers: 3
    })
  })

  it("counts the requests with no caller as one caller, anonymous", () => {
    const { demand } = setUp()
    demand.note(undefined, "usd")
    demand.note(undefined, "eur")
    assert.deepStrictEqual(demand.weights(), { weights: new Map([["usd", 0.5], ["eur", 0.5]]), callers: 1 })
  })

  it("forgets a currency, then a caller, not asked within the window (half an hour)", () => {
    const { clock, demand } = setUp()
    demand.note("ip:198.51.100.1", "usd")
    demand.note("ip:198.51.100.1", "eur")
    demand.note("ip:198.51.100.2", "usd")
    clock.now = T0 + 20 * MINUTE
    demand.note("ip:198.51.100.1", "usd")
    clock.now = T0 + 31 * MINUTE
    assert.deepStrictEqual(demand.weights(), { weights: new Map([["usd", 1]]), callers: 1 })
    assert.deepStrictEqual(demand.size(), { callers: 1, pairs: 1 })
    clock.now = T0 + 51 * MINUTE
    assert.deepStrictEqual(demand.weights(), { weights: new Map(), callers: 0 })
    assert.deepStrictEqual(demand.size(), { callers: 0, pairs: 0 })
  })

  it("sees a new caller at once, though weights are summed at most once a second otherwise", () => {
    const { clock, demand } = setUp()
    demand.note("ip:198.51.100.1", "usd")
    const first = demand.weights()
    assert.strictEqual(demand.weights(), first)
    demand.note("ip:198.51.100.1", "usd")
    assert.strictEqual(demand.weights(), first, "a repeat changes nothing")
    demand.note("ip:198.51.100.2", "usd")
    assert.strictEqual(demand.weights().callers, 2)
    clock.now += 1_000
    assert.notStrictEqual(demand.weights(), first)
  })

  it("is bounded: callers, currencies per caller, pairs in all; the least recently noted go first", () => {
    const { clock, demand } = setUp({ maxCallers: 1_000, maxCurrenciesPerCaller: 8, maxPairs: 1_500 })
    for (let i = 0; i < 5_000; i++) demand.note(`ip:10.0.${i >> 8}.${i & 255}`, "usd")
    assert.deepStrictEqual(demand.size(), { callers: 1_000, pairs: 1_000 })
    // The latest 1,000 are kept.
    assert.strictEqual(demand.weights().weights.get("usd"), 1_000)
    clock.now += MINUTE
    // One caller asking 60 currencies holds its 8 latest, each an eighth of its share.
    for (let c = 0; c < 60; c++) demand.note("ip:203.0.113.77", `c${c}`)
    const { weights } = demand.weights()
    assert.strictEqual(weights.get("c59"), 1 / 8)
    assert.isUndefined(weights.get("c51"))
    assert.deepStrictEqual(demand.size(), { callers: 1_000, pairs: 999 + 8 })
    // Pairs in all: 200 callers of 8 currencies each would be 1,600 pairs.
    for (let i = 0; i < 200; i++) for (let c = 0; c < 8; c++) demand.note(`ip:192.0.2.${i}`, `c${c}`)
    assert.isAtMost(demand.size().pairs, 1_500)
    assert.isAtMost(demand.size().callers, 1_000)
  })

  it.effect("tells time by Effect's Clock; provided in two places of one build, one instance", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const seen: Array<RatesDemandShape> = []
      const user = () => Layer.effectDiscard(Effect.gen(function*() {
        seen.push(yield* RatesDemand)
      })).pipe(Layer.provide(RatesDemand.layer))
      yield* Layer.build(Layer.merge(user(), user()))
      assert.strictEqual(seen.length, 2)
      assert.strictEqual(seen[0], seen[1])
      seen[0]!.note("ip:198.51.100.1", "usd")
      assert.strictEqual(seen[1]!.weights().callers, 1)
      yield* TestClock.adjust("31 minutes")
      assert.strictEqual(seen[1]!.weights().callers, 0)
    }))
})
