/**
 * The Coinbase client against the emulator over real HTTP, healthy: the product list (only what trades),
 * held by the adapter (products.ts) and looked up by pair, daily candles read oldest first at 00:00 UTC
 * with gaps kept, ranges over 300 days split into several calls, ticker and stats strings read as
 * numbers, and closes that line up with CoinGecko's daily points.
 */
import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { asMidnightPoints, change24h } from "../../../../src/rates/coinbase/candles.ts"
import { CoinbaseClient } from "../../../../src/rates/coinbase/CoinbaseClient.ts"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../../emulators/coinbase.ts"
import { coinbaseDailyClose, coinbasePrice, DAY_MS, GAPPY_PRODUCT, startOfUtcDay, tradedOn } from "../../../emulators/coinbase-data.ts"
import { emulatedDailyPrices } from "../../../emulators/coingecko-data.ts"
import { coinbaseClient, products as heldProducts } from "../../../support/coinbase.ts"
import { EMULATOR_NOW } from "../../../support/rates.ts"
import { spendingUntil } from "../../../../src/rates/upstream.ts"

let emulator: CoinbaseEmulator
const TODAY = startOfUtcDay(EMULATOR_NOW)

beforeAll(async () => {
  emulator = await startCoinbaseEmulator({ now: EMULATOR_NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.setRateLimit(true)
  emulator.resetStats()
})

const candleCalls = (id: string) => emulator.stats().byPath[`/products/${id}/candles`] ?? 0

/** What the emulator says the closes of `id` are, day by day from `from` to `to`, days without trades left out. */
const expectedCloses = (id: string, from: number, to: number) => {
  const closes: Array<readonly [number, number]> = []
  for (let day = from; day <= to; day += DAY_MS) {
    const close = coinbaseDailyClose(id, day, EMULATOR_NOW)
    if (close !== undefined) closes.push([day, close])
  }
  return closes
}

describe("CoinbaseClient, healthy", () => {
  it.live("holds the products that trade now, and finds one by base and quote in any case", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      const products = yield* client.products
      const ids = products.map((p) => p.id)
      assert.include(ids, "BTC-EUR")
      assert.include(ids, "SOL-USDT")
      assert.notInclude(ids, "DAI-USD", "delisted")
      assert.notInclude(ids, "XTZ-USDT", "trading disabled")
      emulator.resetStats()
      const list = yield* heldProducts
      const soon = Date.now() + 3_000
      assert.deepStrictEqual(yield* list.productFor("eth", "eur").pipe(spendingUntil(soon)), { id: "ETH-EUR", base: "ETH", quote: "EUR" })
      assert.isUndefined(yield* list.productFor("DAI", "USD").pipe(spendingUntil(soon)))
      assert.isUndefined(yield* list.productFor("PEPE", "USD").pipe(spendingUntil(soon)))
      // Loaded once at start, then held: lookups cost no call.
      assert.strictEqual(emulator.stats().byPath["/products"], 1)
    }).pipe(Effect.provide(coinbaseClient(emulator.url)), Effect.scoped))

  it.live("daily candles: closes oldest first at 00:00 UTC, today's included, with Coinbase's time (its Date header)", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      const { asOf, closes } = yield* client.dailyCandles("BTC-USD", TODAY - 29 * DAY_MS, TODAY)
      assert.strictEqual(asOf, EMULATOR_NOW)
      assert.strictEqual(closes.length, 30)
      assert.deepStrictEqual(closes, expectedCloses("BTC-USD", TODAY - 29 * DAY_MS, TODAY))
      assert.isTrue(closes.every(([day]) => day % DAY_MS === 0))
      assert.strictEqual(closes.at(-1)![1], coinbasePrice("BTC-USD", EMULATOR_NOW), "today's candle closes at the current price")
      assert.strictEqual(candleCalls("BTC-USD"), 1)
    }).pipe(Effect.provide(coinbaseClient(emulator.url))))

  it.live("days without trades stay missing: no point is invented", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      const { closes } = yield* client.dailyCandles(GAPPY_PRODUCT, TODAY - 29 * DAY_MS, TODAY)
      const missing = Array.from({ length: 30 }, (_, k) => TODAY - k * DAY_MS).filter((day) => !tradedOn(GAPPY_PRODUCT, day))
      assert.strictEqual(missing.length, 6)
      assert.strictEqual(closes.length, 24)
      for (const day of missing) assert.isFalse(closes.some(([d]) => d === day))
      assert.deepStrictEqual(closes, expectedCloses(GAPPY_PRODUCT, TODAY - 29 * DAY_MS, TODAY))
    }).pipe(Effect.provide(coinbaseClient(emulator.url))))

  it.live("a year is two calls of at most 300 days, one series; a recent listing has only its days", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      const from = TODAY - 364 * DAY_MS
      const year = (yield* client.dailyCandles("ETH-EUR", from, TODAY)).closes
      assert.strictEqual(year.length, 365)
      assert.deepStrictEqual(year, expectedCloses("ETH-EUR", from, TODAY))
      assert.strictEqual(candleCalls("ETH-EUR"), 2)
      const twoYears = (yield* client.dailyCandles("ETH-USD", TODAY - 729 * DAY_MS, TODAY)).closes
      assert.strictEqual(twoYears.length, 730)
      assert.strictEqual(candleCalls("ETH-USD"), 3)
      const recent = (yield* client.dailyCandles("NEAR-EUR", from, TODAY)).closes
      assert.strictEqual(recent.length, 101)
      assert.strictEqual(recent[0]![0], TODAY - 100 * DAY_MS)
    }).pipe(Effect.provide(coinbaseClient(emulator.url))))

  it.live("ticker and stats: decimal strings read as numbers; the 24 h change from open to last", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      const ticker = yield* client.ticker("SOL-EUR")
      assert.deepStrictEqual(ticker, { price: coinbasePrice("SOL-EUR", EMULATOR_NOW), time: EMULATOR_NOW })
      const stats = yield* client.stats("SOL-EUR")
      const open = coinbasePrice("SOL-EUR", EMULATOR_NOW - DAY_MS)
      assert.deepStrictEqual(stats, { open, last: ticker.price })
      assert.closeTo(change24h(stats), ((ticker.price - open) / open) * 100, 1e-9)
    }).pipe(Effect.provide(coinbaseClient(emulator.url))))

  it.live("an unknown product is not-found, and asking for it does not trouble the breaker", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      for (let i = 0; i < 3; i++) {
        const error = yield* Effect.flip(client.ticker("FOO-USD"))
        assert.strictEqual(error.kind, "not-found")
        assert.include(error.detail, "NotFound")
      }
      assert.strictEqual((yield* client.ticker("BTC-USD")).price, coinbasePrice("BTC-USD", EMULATOR_NOW))
    }).pipe(Effect.provide(coinbaseClient(emulator.url, { breakerFailures: 2 }))))

  it.live("restamped as the price at the next 00:00 UTC, closes agree with CoinGecko's daily points within the venues' spread", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      const gecko = new Map(emulatedDailyPrices("bitcoin", "eur", 90, EMULATOR_NOW))
      const { asOf, closes } = yield* client.dailyCandles("BTC-EUR", TODAY - 90 * DAY_MS, TODAY)
      const points = asMidnightPoints(closes, asOf)
      assert.strictEqual(points.length, 90, "today's running candle is not a daily point")
      assert.strictEqual(points.at(-1)![0], TODAY)
      for (const [instant, price] of points) {
        const reference = gecko.get(instant)
        assert.isDefined(reference, new Date(instant).toISOString())
        assert.isAtMost(Math.abs(price / reference! - 1), 0.0006 + 1e-9)
      }
    }).pipe(Effect.provide(coinbaseClient(emulator.url))))
})
