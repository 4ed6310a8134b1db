/**
 * The memory bound of the rates cache under floods (issue 13), over real HTTP against the emulator:
 * distinct unknown symbols store nothing; dead coins (listed, without market or chart) fill only the
 * negative tier, bounded; real data stays within its bytes, least recently used out first, so what is
 * asked for keeps its copy. CopyStore.ts states the bound.
 */
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { emulatedCoins, emulatedCurrencies } from "../../emulators/coingecko-data.ts"
import { CopyStore } from "../../../src/rates/copies/CopyStore.ts"
import * as Rates from "../../../src/rates/layer.ts"
import { askFrom, junkSymbols, startRatesApp } from "../e2e/rates-abuse-support.ts"
import { PLENTY } from "../../support/credits.ts"
import { EMULATOR_NOW, healthyEnv } from "../../support/rates.ts"

let emulator: CoinGeckoEmulator

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ now: EMULATOR_NOW, extraCoins: 5_000 })
})
afterAll(() => emulator.close())

describe("rates cache memory under a flood", () => {
  it("distinct unknown symbols store nothing; dead coins only fill the negative tier, bounded", async () => {
    const store = CopyStore.makeMemory({ maxBytes: 4 * 1024 * 1024, negativeEntries: 500 })
    // A budget and shares large enough that the flood really reaches the cache.
    const env = healthyEnv(emulator.url, { COINGECKO_CALLS_PER_MIN: "10000", COINGECKO_CALLER_SHARE_PCT: "100", COINGECKO_CALLS_PER_MONTH: PLENTY })
    const app = await startRatesApp(emulator, {}, Rates.layerTest({ env, copies: Layer.succeed(CopyStore)(store) }))
    try {
      const held = await askFrom(app, "203.0.113.1", { cryptos: ["BTC", "ETH"], days: 30 })
      expect(held.status).toBe(200)
      const before = store.size()

      // 20,000 distinct tickers no coin has, from 400 addresses.
      for (let i = 0; i < 400; i++) {
        expect((await askFrom(app, `10.0.${i >> 8}.${i & 255}`, { cryptos: junkSymbols() })).status).toBe(400)
      }
      expect(store.size()).toEqual(before)

      // 1,500 dead coins (a negative latest price and a missing series each), 50 per request.
      for (let i = 0; i < 30; i++) {
        const cryptos = Array.from({ length: 50 }, (_, k) => `FC${i * 50 + k}`)
        expect((await askFrom(app, `10.1.0.${i}`, { cryptos })).status).toBe(400)
      }
      const afterDead = store.size()
      expect(afterDead.negative.entries).toBe(500)
      expect(afterDead.data).toEqual(before.data)

      emulator.setFault("5xx")
      const during = await askFrom(app, "203.0.113.1", { cryptos: ["BTC", "ETH"], days: 30 })
      emulator.setFault("none")
      expect(during.status).toBe(200)
      expect(during.body.rates).toEqual(held.body.rates)
      console.info(`flood: 20,000 unknown symbols → cache ${JSON.stringify(before)} unchanged; 1,500 dead coins → ${JSON.stringify(afterDead)}`)
    } finally {
      await app.close()
    }
  }, 120_000)

  it("real data stays within its bytes; the entry asked for all along keeps its copy", async () => {
    const maxBytes = 256 * 1024 // about 25 years of daily points
    const store = CopyStore.makeMemory({ maxBytes })
    const env = healthyEnv(emulator.url, { COINGECKO_CALLS_PER_MIN: "10000", COINGECKO_CALLER_SHARE_PCT: "100", COINGECKO_CALLS_PER_MONTH: PLENTY })
    const app = await startRatesApp(emulator, {}, Rates.layerTest({ env, copies: Layer.succeed(CopyStore)(store) }))
    try {
      const popular = { cryptos: ["BTC"], currency: "usd", days: 365 }
      const first = await askFrom(app, "203.0.113.1", popular)
      expect(first.status).toBe(200)
      let peak = 0
      const coins = emulatedCoins.filter((c) => c.chartMissing !== true).map((c) => c.symbol.toUpperCase()).filter((s) => s !== "ETH" && s !== "HOT")
      for (const currency of [...emulatedCurrencies.keys()].filter((c) => c !== "usd")) {
        for (let i = 0; i < coins.length; i += 10) {
          const answer = await askFrom(app, "10.2.0.1", { cryptos: coins.slice(i, i + 10), currency, days: 365 })
          expect(answer.status).toBe(200)
          peak = Math.max(peak, store.size().data.bytes)
          expect((await askFrom(app, "203.0.113.1", { ...popular, days: 300 + i })).status).toBe(200) // the popular one, in use
        }
      }
      expect(peak).toBeLessThanOrEqual(maxBytes)
      const calls = emulator.stats().byPath["/coins/bitcoin/market_chart/range"]
      emulator.setFault("5xx")
      const during = await askFrom(app, "203.0.113.1", popular)
      emulator.setFault("none")
      expect(during.status).toBe(200)
      expect(emulator.stats().byPath["/coins/bitcoin/market_chart/range"]).toBe(calls)
      console.info(`real data flood: peak ${peak} bytes of ${maxBytes}; ${JSON.stringify(store.size())}`)
    } finally {
      await app.close()
    }
  }, 120_000)
})
