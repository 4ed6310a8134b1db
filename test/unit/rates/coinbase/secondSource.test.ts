/**
 * The second source as Coinbase serves it (coinbase/secondSource.ts) against the emulator: a whole rate
 * per curated coin Coinbase lists in the currency (price and 24 h change from its stats, the series from
 * its candles restamped at 00:00 UTC), `not-found` for the rest, and what it holds shared: identical
 * concurrent requests make one candles call and one stats call, repeated ones within a minute none.
 * Which days are closed is Coinbase's word, not our clock's: a clock of ours running ahead keeps no
 * moving candle in the history.
 */
import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { Clock, Effect, Layer, Option } from "effect"
import { DailyHistory } from "../../../../src/rates/history/DailyHistory.ts"
import { SecondSource } from "../../../../src/rates/ports.ts"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../../emulators/coinbase.ts"
import { coinbaseDailyClose, coinbasePrice, DAY_MS, startOfUtcDay } from "../../../emulators/coinbase-data.ts"
import { clockLayerFrom } from "../../../support/clock.ts"
import { EMULATOR_NOW } from "../../../support/rates.ts"
import { coinbaseSecondSource } from "../../../support/coinbase.ts"
import { spendingUntil } from "../../../../src/rates/upstream.ts"

let emulator: CoinbaseEmulator
beforeAll(async () => {
  emulator = await startCoinbaseEmulator({ now: EMULATOR_NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.resetStats()
})

const calls = (path: string) => emulator.stats().byPath[path] ?? 0
const soon = () => Date.now() + 5_000

describe("the second source served by Coinbase", () => {
  it.live("a whole rate for a curated coin Coinbase lists; not-found for one it does not, or an uncurated ticker", () =>
    Effect.gen(function*() {
      const second = yield* SecondSource
      assert.deepStrictEqual(second.sourcing, { source: "coinbase", attribution: "Data provided by Coinbase Exchange" })
      const outcomes = yield* second.ratesFor([{ symbol: "ETH", id: "ethereum" }, { symbol: "BNB", id: "binancecoin" }, { symbol: "ETH", id: "bridged-eth" }], "eur").pipe(spendingUntil(soon()))
      const eth = outcomes.get("ethereum")!
      assert.strictEqual(eth._tag, "Served")
      if (eth._tag === "Served") {
        assert.strictEqual(eth.rate.price, coinbasePrice("ETH-EUR", EMULATOR_NOW))
        assert.strictEqual(eth.rate.name, "Ethereum")
        assert.isAtLeast(eth.rate.series.length, 300)
        assert.isTrue(eth.rate.series.every(([day]) => day % 86_400_000 === 0))
        assert.strictEqual(eth.rate.holdsUntil - eth.rate.asOf, 60_000)
      }
      for (const id of ["binancecoin", "bridged-eth"]) {
        const outcome = outcomes.get(id)!
        assert.strictEqual(outcome._tag === "Failed" ? outcome.error.kind : "served", "not-found", id)
      }
    }).pipe(Effect.provide(coinbaseSecondSource(emulator.url))))

  it.live("identical concurrent requests share one candles call and one stats call; a repeat within the minute makes none", () =>
    Effect.gen(function*() {
      const second = yield* SecondSource
      emulator.setLatency("/products/LTC-EUR", 150)
      const ask = second.ratesFor([{ symbol: "LTC", id: "litecoin" }], "eur").pipe(spendingUntil(soon()))
      const answers = yield* Effect.all(Array.from({ length: 8 }, () => ask), { concurrency: "unbounded" })
      emulator.setLatency("/products/LTC-EUR", 0)
      for (const answer of answers) assert.strictEqual(answer.get("litecoin")?._tag, "Served")
      // One fetch of the series: a year is two windows of at most 300 candles.
      assert.strictEqual(calls("/products/LTC-EUR/candles"), 2)
      assert.strictEqual(calls("/products/LTC-EUR/stats"), 1)
      yield* ask
      assert.strictEqual(calls("/products/LTC-EUR/candles") + calls("/products/LTC-EUR/stats"), 3)
    }).pipe(Effect.provide(coinbaseSecondSource(emulator.url))))

  it.live("our clock a day ahead of Coinbase's: the candle of Coinbase's today, still moving, is never kept as a close", () => {
    const history = DailyHistory.makeMemory()
    const today = startOfUtcDay(EMULATOR_NOW)
    return Effect.gen(function*() {
      const second = yield* SecondSource
      const outcome = (yield* second.ratesFor([{ symbol: "BTC", id: "bitcoin" }], "usd").pipe(spendingUntil((yield* Clock.currentTimeMillis) + 5_000))).get("bitcoin")!
      assert.strictEqual(outcome._tag, "Served", outcome._tag === "Failed" ? outcome.error.message : "")
      const kept = Option.getOrUndefined(yield* history.read({ coin: "bitcoin", currency: "usd", source: "coinbase" }))
      const days = (kept?.points ?? []).map(([day]) => new Date(day).toISOString())
      assert.notInclude(days, new Date(today + DAY_MS).toISOString(), "today's moving candle kept as the next day's point")
      assert.strictEqual(days.at(-1), new Date(today).toISOString(), "the last point is yesterday's close, at today's 00:00")
      assert.strictEqual(kept!.points.at(-1)![1], coinbaseDailyClose("BTC-USD", today - DAY_MS, EMULATOR_NOW))
    }).pipe(Effect.provide(coinbaseSecondSource(emulator.url, {}, history).pipe(Layer.provideMerge(clockLayerFrom(EMULATOR_NOW + DAY_MS)))))
  })
})
