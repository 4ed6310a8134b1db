import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { RatesProvider } from "../../../src/rates/RatesProvider.ts"
import { TEST_AS_OF } from "../../../src/rates/testRates.ts"

const historical = (symbols: ReadonlyArray<string>, currency = "usd", days = 30) =>
  Effect.gen(function*() {
    const rates = yield* RatesProvider
    return (yield* rates.historical({ symbols, currency, days })).result
  }).pipe(Effect.provide(RatesProvider.layerTest))

describe("RatesProvider.layerTest", () => {
  it.effect("knows BTC, ETH and SOL, in request order, the rest unknown; same answer every time", () =>
    Effect.gen(function*() {
      const result = yield* historical(["SOL", "FOO", "BTC", "ETH"], "eur", 7)
      assert.deepStrictEqual(result.rates.map((r) => [r.symbol, r.id]), [["SOL", "solana"], ["BTC", "bitcoin"], ["ETH", "ethereum"]])
      assert.deepStrictEqual(result.unknown, ["FOO"])
      assert.strictEqual(result.currency, "EUR")
      assert.strictEqual(result.asOf, TEST_AS_OF)
      for (const rate of result.rates) {
        assert.strictEqual(rate.series.length, 7)
        assert.strictEqual(rate.series.at(-1)![0], Date.parse("2026-11-22T00:00:00Z"))
        assert.isTrue(rate.series.every(([t], i) => t % 86_400_000 === 0 && (i === 0 || t > rate.series[i - 1]![0])))
      }
      assert.deepStrictEqual(yield* historical(["SOL", "FOO", "BTC", "ETH"], "eur", 7), result)
    }))

  it.effect("says its answers hold for ever: they never change", () =>
    Effect.gen(function*() {
      const rates = yield* RatesProvider
      const answer = yield* rates.historical({ symbols: ["BTC"], currency: "usd", days: 3 })
      assert.strictEqual(answer.freshUntil, Number.POSITIVE_INFINITY)
    }).pipe(Effect.provide(RatesProvider.layerTest)))

  it.effect("DOWN fails as an upstream error, BUSY as unavailable for 30 s, an odd currency as unsupported", () =>
    Effect.gen(function*() {
      const down = yield* Effect.flip(historical(["BTC", "DOWN"]))
      assert.strictEqual(down._tag, "RatesUpstreamError")
      const busy = yield* Effect.flip(historical(["BUSY"]))
      assert.deepInclude(busy, { _tag: "RatesUnavailableError", retryAfterSeconds: 30 })
      const currency = yield* Effect.flip(historical(["BTC"], "xyz"))
      assert.deepInclude(currency, { _tag: "UnsupportedCurrencyError", currency: "xyz" })
    }))

  it.effect("no known symbol is a 200-shaped result with empty rates (the handler makes it a 400)", () =>
    Effect.gen(function*() {
      const result = yield* historical(["FOO", "BAR"])
      assert.deepStrictEqual(result.rates, [])
      assert.deepStrictEqual(result.unknown, ["FOO", "BAR"])
    }))
})
