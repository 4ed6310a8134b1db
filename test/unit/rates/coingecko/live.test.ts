/**
 * The live CoinGecko provider against the emulator over real HTTP: correct data, symbol handling,
 * and the upstream economy (cache + single-flight) measured by the emulator's call counts.
 */
import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import { emulatedChange, emulatedDailyPrices, emulatedPrice } from "../../../emulators/coingecko-data.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../../emulators/coingecko.ts"
import { RatesProvider, type RatesResult } from "../../../../src/rates/RatesProvider.ts"
import { EMULATOR_NOW, healthyEnv, historical, liveRates } from "../../../support/rates.ts"

let emulator: CoinGeckoEmulator

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ now: EMULATOR_NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.resetStats()
})

/** What the provider must answer for one coin, from the emulator's own formulas. */
const expectedRate = (symbol: string, id: string, currency: string, days: number) => ({
  symbol,
  id,
  price: emulatedPrice(id, currency, EMULATOR_NOW),
  change: {
    "24h": emulatedChange(id, currency, EMULATOR_NOW, 24),
    "7d": emulatedChange(id, currency, EMULATOR_NOW, 168),
    "30d": emulatedChange(id, currency, EMULATOR_NOW, 720)
  },
  // The emulator answers `days` closes and a trailing "now"; only the closes belong in the series.
  series: emulatedDailyPrices(id, currency, days, EMULATOR_NOW).slice(0, days)
})

const ratesOf = (result: RatesResult) =>
  result.rates.map(({ change, id, price, series, symbol }) => ({ symbol, id, price, change, series: series.map(([t, p]) => [t, p]) }))

describe("CoinGecko provider, healthy upstream", () => {
  it.live("answers series, price and changes exactly as the upstream has them, for several coins and currencies", () =>
    Effect.gen(function*() {
      for (const [currency, days] of [["usd", 30], ["eur", 7], ["jpy", 1], ["gbp", 365]] as const) {
        const result = yield* historical({ symbols: ["BTC", "ETH", "SOL", "DOGE"], currency, days })
        assert.deepStrictEqual(ratesOf(result), [
          expectedRate("BTC", "bitcoin", currency, days),
          expectedRate("ETH", "ethereum", currency, days),
          expectedRate("SOL", "solana", currency, days),
          expectedRate("DOGE", "dogecoin", currency, days)
        ])
        assert.strictEqual(result.currency, currency.toUpperCase())
        assert.strictEqual(result.days, days)
        assert.strictEqual(result.interval, "daily")
        assert.strictEqual(result.source, "coingecko")
        assert.strictEqual(result.attribution, "Data provided by CoinGecko")
        assert.strictEqual(result.stale, false)
        assert.deepStrictEqual(result.unknown, [])
        assert.match(result.asOf, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
        for (const rate of result.rates) {
          assert.strictEqual(rate.series.length, days)
          for (const [t] of rate.series) assert.strictEqual(t % 86_400_000, 0, "every point at 00:00 UTC")
          assert.isTrue(rate.series.every(([t], i) => i === 0 || t > rate.series[i - 1]![0]), "oldest first")
        }
      }
      assert.deepStrictEqual(
        (yield* historical({ symbols: ["BTC"] })).rates.map((r) => r.name),
        ["Bitcoin"]
      )
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url), EMULATOR_NOW))))

  it.live("keeps request order, lists unknown symbols in order, and resolves ETH to Ethereum itself", () =>
    Effect.gen(function*() {
      const result = yield* historical({ symbols: ["NOPE", "SOL", "ETH", "ZZZ9", "BTC"] })
      assert.deepStrictEqual(result.rates.map((r) => [r.symbol, r.id]), [["SOL", "solana"], ["ETH", "ethereum"], ["BTC", "bitcoin"]])
      assert.deepStrictEqual(result.unknown, ["NOPE", "ZZZ9"])
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url), EMULATOR_NOW))))

  it.live("resolves uncurated symbols from the coin index, taking the top-ranked coin of a shared ticker", () =>
    Effect.gen(function*() {
      const result = yield* historical({ symbols: ["HOT", "PEPE", "RENDER"], currency: "eur" })
      assert.deepStrictEqual(result.rates.map((r) => [r.symbol, r.id, r.name]), [
        ["HOT", "holotoken", "Holo"],
        ["PEPE", "pepe", "Pepe"],
        ["RENDER", "render-token", "Render"]
      ])
      assert.deepStrictEqual(ratesOf(result)[0], expectedRate("HOT", "holotoken", "eur", 30))
      // No lookup per symbol: the index (the coin list and one page of ranks), then one batch of latest prices.
      assert.deepStrictEqual(emulator.stats().byQuery, { "markets:ranks": 1, "markets:ids": 1 })
      assert.strictEqual(emulator.stats().byPath["/coins/list"], 1)
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url), EMULATOR_NOW))))

  it.live("answers unknown symbols from the index, with no upstream call for them", () =>
    Effect.gen(function*() {
      yield* historical({ symbols: ["HOT", "NOPE"] })
      const calls = emulator.stats().total
      const again = yield* historical({ symbols: ["HOT", "NOPE", "ZZZ1", "ZZZ2"] })
      assert.deepStrictEqual(again.unknown, ["NOPE", "ZZZ1", "ZZZ2"])
      const none = yield* historical({ symbols: Array.from({ length: 50 }, (_, i) => `NOPE${i}`) })
      assert.strictEqual(none.rates.length, 0)
      assert.strictEqual(emulator.stats().total, calls, "no call for unknown symbols")
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url), EMULATOR_NOW))))

  it.live("treats a resolved coin the upstream does not know (404 coin not found) as unknown", () =>
    Effect.gen(function*() {
      const result = yield* historical({ symbols: ["GHOST", "BTC"] })
      assert.deepStrictEqual(result.rates.map((r) => r.symbol), ["BTC"])
      assert.deepStrictEqual(result.unknown, ["GHOST"])
      assert.strictEqual(emulator.stats().byPath["/coins/ghost-coin/market_chart/range"], 1)
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url), EMULATOR_NOW))))

  it.live("rejects a currency the upstream does not quote, and checks the list once a day only", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(historical({ symbols: ["BTC"], currency: "xyz" }))
      assert.strictEqual(error._tag, "UnsupportedCurrencyError")
      yield* historical({ symbols: ["BTC"], currency: "chf" })
      assert.strictEqual(emulator.stats().byPath["/simple/supported_vs_currencies"], 1)
      assert.strictEqual(emulator.stats().byPath["/coins/bitcoin/market_chart/range"], 1, "nothing fetched for xyz")
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url), EMULATOR_NOW))))

  it.live("50 concurrent identical cold queries make one upstream call per coin; warm queries make none", () =>
    Effect.gen(function*() {
      // A little latency so the 50 queries really overlap upstream.
      emulator.setLatency("/coins", 150)
      const query = { symbols: ["BTC", "ETH", "SOL", "PEPE"], currency: "usd", days: 90 } as const
      const cold = yield* Effect.all(Array.from({ length: 50 }, () => historical(query)), { concurrency: "unbounded" })
      const coldStats = emulator.stats()
      emulator.setLatency("/coins", 0)
      // One batched latest-price call for the four coins (the ranks, /coins/markets too, are the lists').
      assert.strictEqual(coldStats.byQuery["markets:ids"], 1)
      const { "/coins/markets": _markets, ...byPath } = coldStats.byPath
      assert.deepStrictEqual(byPath, {
        "/simple/supported_vs_currencies": 1, // at start-up, with the coin index:
        "/coins/list": 1,
        "/coins/bitcoin/market_chart/range": 1,
        "/coins/ethereum/market_chart/range": 1,
        "/coins/solana/market_chart/range": 1,
        "/coins/pepe/market_chart/range": 1
      })
      for (const result of cold) assert.deepStrictEqual(result, cold[0])

      emulator.resetStats()
      const warm = yield* Effect.all(Array.from({ length: 50 }, () => historical(query)), { concurrency: "unbounded" })
      assert.strictEqual(emulator.stats().total, 0)
      assert.deepStrictEqual(ratesOf(warm[0]!), ratesOf(cold[0]!))
      console.info(`coalescing: cold 50 queries → upstream ${JSON.stringify(coldStats.byPath)}; warm 50 → ${emulator.stats().total}`)
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url), EMULATOR_NOW))))

  it.live("caches series per (coin, currency): any days is sliced from one year of points", () =>
    Effect.gen(function*() {
      for (const days of [30, 30, 20, 1, 7, 90, 365, 200]) {
        const result = yield* historical({ symbols: ["BTC"], currency: "usd", days })
        assert.deepStrictEqual(ratesOf(result)[0]!.series, expectedRate("BTC", "bitcoin", "usd", days).series)
      }
      assert.strictEqual(emulator.stats().byPath["/coins/bitcoin/market_chart/range"], 1)
      yield* historical({ symbols: ["BTC"], currency: "eur", days: 30 })
      assert.strictEqual(emulator.stats().byPath["/coins/bitcoin/market_chart/range"], 2)
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url), EMULATOR_NOW))))

  it.live("caps upstream concurrency", () =>
    Effect.gen(function*() {
      emulator.setLatency("/coins/", 120)
      yield* historical({ symbols: ["BTC", "ETH", "SOL", "ADA", "XRP", "DOT", "LTC", "LINK"] })
      emulator.setLatency("/coins/", 0)
      assert.strictEqual(emulator.stats().maxInFlight, 2)
      const charts = Object.keys(emulator.stats().byPath).filter((path) => path.endsWith("/market_chart/range"))
      assert.strictEqual(charts.length, 8)
      assert.strictEqual(emulator.stats().byQuery["markets:ids"], 1)
    }).pipe(Effect.provide(liveRates(healthyEnv(emulator.url, { COINGECKO_MAX_CONCURRENCY: "2" }), EMULATOR_NOW))))
})

describe("CoinGecko provider, API keys", () => {
  let keyed: CoinGeckoEmulator
  beforeAll(async () => {
    keyed = await startCoinGeckoEmulator({ now: EMULATOR_NOW, requireKey: "demo-key-1", keyHeader: "x-cg-demo-api-key" })
  })
  afterAll(() => keyed.close())

  it.live("sends the demo key in x-cg-demo-api-key", () =>
    historical({ symbols: ["BTC"] }).pipe(
      Effect.map((result) => assert.deepStrictEqual(result.rates.map((r) => r.id), ["bitcoin"])),
      Effect.provide(liveRates(healthyEnv(keyed.url, { COINGECKO_API_KEY: "demo-key-1" }), EMULATOR_NOW))
    ))

  it.live("a refused key is an upstream error (502), and is not retried", () =>
    Effect.gen(function*() {
      keyed.resetStats()
      const error = yield* Effect.flip(historical({ symbols: ["BTC"] }))
      assert.strictEqual(error._tag, "RatesUpstreamError")
      assert.match(error._tag === "RatesUpstreamError" ? error.reason : "", /key was refused/)
      assert.strictEqual(keyed.stats().byPath["/coins/bitcoin/market_chart/range"], 1)
    }).pipe(
      // Right key, wrong header for this host: what a pro key on the demo host looks like.
      Effect.provide(liveRates(healthyEnv(keyed.url, { COINGECKO_API_KEY: "demo-key-1", COINGECKO_API_PLAN: "pro" })))
    ))
})

describe("CoinGecko provider layers", () => {
  it.live("builds from configuration and fails start-up naming the bad variable", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Layer.build(liveRates({ COINGECKO_BASE_URL: "not a url", COINGECKO_MAX_CONCURRENCY: "0" })))
      assert.isTrue(Exit.isFailure(exit))
      const text = JSON.stringify(exit)
      assert.include(text, "COINGECKO_BASE_URL")
      assert.include(text, "COINGECKO_MAX_CONCURRENCY")
      const ok = yield* Effect.exit(Effect.provide(Effect.asVoid(RatesProvider), liveRates(healthyEnv(emulator.url), EMULATOR_NOW)))
      assert.isTrue(Exit.isSuccess(ok))
    }))
})
