/**
 * Issue 22, "Done when": the second source (Coinbase) answers what CoinGecko cannot, over real HTTP
 * against both emulators (fallback/, CONTRACT C4 "Second source").
 *   1. CoinGecko refusing everything from start-up (429, or the month's credits spent): BTC and ETH in
 *      USD and EUR are Coinbase's, price and every daily point equal to the emulator's, oldest first at
 *      00:00 UTC; a coin Coinbase does not list is a 503 with Retry-After.
 *   2. CoinGecko healthy, Coinbase failing or slow (5 s): CoinGecko's answers, no Coinbase data call.
 *   3. CoinGecko back: the next answer is CoinGecko's again, and the points both sources stored agree.
 * The fault matrix (CoinGecko × Coinbase, with what each answered): rates-fallback-matrix.test.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { change24h } from "../../../src/rates/coinbase/candles.ts"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { coinbaseDailyClose, coinbasePrice, DAY_MS, startOfUtcDay } from "../../emulators/coinbase-data.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { emulatedDailyPrices } from "../../emulators/coingecko-data.ts"
import { ask, coinGeckoFastEnv, type FallbackApp, NOW, startFallbackApp, summary } from "./rates-fallback-support.ts"

let coinGecko: CoinGeckoEmulator
let coinbase: CoinbaseEmulator
const apps: Array<FallbackApp> = []

beforeAll(async () => {
  coinGecko = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
  coinbase = await startCoinbaseEmulator({ host: "127.0.0.1", now: NOW })
})
afterAll(async () => {
  for (const app of apps) await app.close()
  await coinGecko.close()
  await coinbase.close()
})
beforeEach(() => {
  coinGecko.setFault("none")
  coinbase.setFault("none")
  coinbase.setLatency("/products", 0)
  // Each app keeps to Coinbase's 10 a second (its own bucket); several apps in a row share the emulator's.
  coinbase.setRateLimit(false)
  coinGecko.resetStats()
  coinbase.resetStats()
})

const started = async (app: Promise<FallbackApp>) => {
  const ready = await app
  apps.push(ready)
  return ready
}

const TODAY = startOfUtcDay(NOW)
const SYMBOLS = [["BTC", "bitcoin"], ["ETH", "ethereum"]] as const

/** The emulator's Coinbase points as the service must serve them: the close of day D-1 at 00:00 UTC of D. */
const coinbaseSeries = (product: string, days: number) =>
  Array.from({ length: days }, (_, i) => {
    const day = TODAY - (days - 1 - i) * DAY_MS
    return [day, coinbaseDailyClose(product, day - DAY_MS, NOW)!] as const
  })

const coinbaseDataCalls = () =>
  Object.entries(coinbase.stats().byPath).filter(([path]) => path !== "/products").reduce((sum, [, n]) => sum + n, 0)

/** Asserts a 200 answered wholly by Coinbase, equal to the emulator's. */
const expectCoinbase = (body: Record<string, any>, currency: string, days: number) => {
  expect(body.source).toBe("coinbase")
  expect(body.attribution).toBe("Data provided by Coinbase Exchange")
  expect(body.stale).toBe(false)
  expect(body.currency).toBe(currency.toUpperCase())
  expect(body.rates.map((r: any) => r.id)).toEqual(SYMBOLS.map(([, id]) => id))
  for (const rate of body.rates) {
    const product = `${rate.symbol}-${currency.toUpperCase()}`
    expect(rate.source).toBe("coinbase")
    expect(rate.price).toBe(coinbasePrice(product, NOW))
    expect(rate.change["24h"]).toBeCloseTo(change24h({ open: coinbasePrice(product, NOW - DAY_MS), last: coinbasePrice(product, NOW) }), 10)
    expect(rate.series).toEqual(coinbaseSeries(product, days))
    expect(rate.series.every(([t]: [number]) => t % DAY_MS === 0)).toBe(true)
    expect(rate.series.at(-1)[0]).toBe(TODAY)
  }
}

describe("issue 22, done when", () => {
  const refusing = [
    ["CoinGecko answering 429 to everything from start-up", { env: {}, spent: undefined, fault: true }],
    ["the month's credits spent (COINGECKO_CALLS_PER_MONTH=1000, a spent ledger)", { env: { COINGECKO_CALLS_PER_MONTH: "1000" }, spent: 1000, fault: false }]
  ] as const
  it.each(refusing)("%s: BTC and ETH are Coinbase's, in USD and EUR; a coin Coinbase does not list is a 503", async (name, setting) => {
    if (setting.fault) coinGecko.setFault("429")
    const app = await started(startFallbackApp({
      coinGeckoEnv: coinGeckoFastEnv(coinGecko.url, setting.env),
      coinbaseUrl: coinbase.url,
      ...(setting.spent === undefined ? {} : { creditsSpent: setting.spent })
    }))
    const usd = await ask(app, { cryptos: ["BTC", "ETH"], days: 7 })
    expect(usd.status, JSON.stringify(usd.body)).toBe(200)
    expectCoinbase(usd.body, "usd", 7)
    const eur = await ask(app, { cryptos: ["BTC", "ETH"], currency: "eur", days: 30 })
    expect(eur.status, JSON.stringify(eur.body)).toBe(200)
    expectCoinbase(eur.body, "eur", 30)
    // BNB: a curated coin Coinbase does not list; neither source can serve it.
    const unlisted = await ask(app, { cryptos: ["BNB"], days: 7 })
    expect(unlisted.status).toBe(503)
    expect(unlisted.body.code).toBe("service_unavailable")
    expect(Number(unlisted.retryAfter)).toBeGreaterThan(0)
    if (setting.fault) expect(Number(unlisted.retryAfter)).toBeLessThanOrEqual(7) // CoinGecko's Retry-After
    // With a coin both can: still 503, a partial answer would look complete.
    const partly = await ask(app, { cryptos: ["BTC", "BNB"], days: 7 })
    expect(partly.status).toBe(503)
    const charts = Object.keys(coinGecko.stats().byPath).filter((path) => path.includes("market_chart"))
    if (!setting.fault) expect(coinGecko.stats().total, "no CoinGecko call without credits").toBe(0)
    console.info(`${name}: BTC,ETH 7d usd → ${summary(usd)}; BTC,ETH 30d eur → ${summary(eur)}; BNB → ${summary(unlisted)}; BTC,BNB → ${
      summary(partly)
    }; CoinGecko calls ${coinGecko.stats().total} (charts ${charts.length}), Coinbase ${JSON.stringify(coinbase.stats().byPath)}`)
  }, 30_000)

  const coinbaseFaults = [
    ["failing (5xx)", () => coinbase.setFault("5xx")],
    ["slow (5 s)", () => coinbase.setLatency("/products", 5_000)]
  ] as const
  it.each(coinbaseFaults)("Coinbase %s, CoinGecko healthy: CoinGecko's answers, as fast, no Coinbase data call", async (name, fault) => {
    fault()
    const app = await started(startFallbackApp({ coinGeckoEnv: coinGeckoFastEnv(coinGecko.url), coinbaseUrl: coinbase.url }))
    const cold = await ask(app, { cryptos: ["BTC", "ETH", "SOL"], currency: "usd", days: 30 })
    const warm = await ask(app, { cryptos: ["BTC", "ETH", "SOL"], currency: "usd", days: 7 })
    for (const answered of [cold, warm]) {
      expect(answered.status).toBe(200)
      expect(answered.body.source).toBe("coingecko")
      expect(answered.body.attribution).toBe("Data provided by CoinGecko")
      expect(answered.body.rates.every((r: any) => r.source === "coingecko")).toBe(true)
    }
    expect(cold.body.rates[0].series).toEqual(emulatedDailyPrices("bitcoin", "usd", 30, NOW).slice(0, -1))
    // Healthy CoinGecko answers in well under a second; a Coinbase call on the path would cost 5 s or its retries.
    expect(cold.ms).toBeLessThan(2_000)
    expect(warm.ms).toBeLessThan(500)
    expect(coinbaseDataCalls(), JSON.stringify([coinbase.stats().byPath, cold.body, coinGecko.stats().byPath])).toBe(0)
    console.info(`CoinGecko healthy, Coinbase ${name}: cold ${summary(cold)}; warm ${summary(warm)}; Coinbase calls ${JSON.stringify(coinbase.stats().byPath)}`)
  }, 30_000)

  it("CoinGecko back: the next answer after a Coinbase one (held a minute at most) is CoinGecko's, and the stored points agree", async () => {
    coinGecko.setFault({ mode: "429", retryAfterSeconds: 1 })
    const app = await started(startFallbackApp({ coinGeckoEnv: coinGeckoFastEnv(coinGecko.url), coinbaseUrl: coinbase.url }))
    const query = { cryptos: ["BTC", "ETH"], currency: "usd", days: 30 }
    const during = await ask(app, query)
    expect(during.status).toBe(200)
    expect(during.body.source).toBe("coinbase")
    coinGecko.setFault("none")
    // The Coinbase answer is repeated for a minute at most (its prices' life): then CoinGecko's.
    const repeated = await ask(app, query)
    expect(repeated.body.source).toBe("coinbase")
    app.advance(61_000)
    const after = await ask(app, query)
    const answers = [summary(repeated), summary(after)]
    expect(after.status).toBe(200)
    expect(after.body.source, answers.join("; ")).toBe("coingecko")
    expect(after.body.attribution).toBe("Data provided by CoinGecko")
    for (const rate of after.body.rates) {
      expect(rate.source).toBe("coingecko")
      expect(rate.series).toEqual(emulatedDailyPrices(rate.id, "usd", 30, NOW).slice(0, -1))
    }
    let largest = { relative: 0, at: "" }
    let overlap = 0
    for (const [, id] of SYMBOLS) {
      const fromCoinbase = new Map(await app.held(id, "usd", "coinbase"))
      const fromCoinGecko = await app.held(id, "usd", "coingecko")
      expect(fromCoinbase.size).toBeGreaterThanOrEqual(364)
      for (const [day, price] of fromCoinGecko) {
        const other = fromCoinbase.get(day)
        if (other === undefined) continue
        overlap++
        const relative = Math.abs(other - price) / price
        if (relative > largest.relative) largest = { relative, at: `${id} ${new Date(day).toISOString().slice(0, 10)}` }
      }
    }
    expect(overlap).toBeGreaterThanOrEqual(2 * 364)
    // Two venues differ a little (the emulator: at most 0.06 %); a day off would differ by percents.
    expect(largest.relative).toBeLessThan(0.001)
    console.info(`CoinGecko back: during ${summary(during)}; within the minute, then 61 s later: ${answers.join("; ")}; stored points of both sources over ${overlap} days: largest difference ${
      (largest.relative * 100).toFixed(4)
    } % (${largest.at})`)
  }, 30_000)

  it("a stale CoinGecko copy is not fresh: Coinbase answers; with Coinbase failing too, the stale copy does", async () => {
    const app = await started(startFallbackApp({ coinGeckoEnv: coinGeckoFastEnv(coinGecko.url), coinbaseUrl: coinbase.url }))
    const query = { cryptos: ["BTC", "ETH"], currency: "usd", days: 7 }
    const fresh = await ask(app, query)
    expect(fresh.body.source).toBe("coingecko")
    coinGecko.setFault("5xx")
    app.advance(2 * 3_600_000) // the latest prices past their life and their hour of grace
    const replaced = await ask(app, query)
    expect(replaced.status).toBe(200)
    expect(replaced.body.source).toBe("coinbase")
    expect(replaced.body.stale).toBe(false)
    coinbase.setFault("5xx")
    app.advance(61_000) // past the Coinbase answer's minute
    const lastGood = await ask(app, query)
    expect(lastGood.status).toBe(200)
    expect(lastGood.body.source).toBe("coingecko")
    expect(lastGood.body.stale).toBe(true)
    expect(lastGood.body.rates.map((r: any) => r.series)).toEqual(fresh.body.rates.map((r: any) => r.series))
    console.info(`held copies aged 2 h, CoinGecko 5xx: Coinbase ok → ${summary(replaced)}; Coinbase failing too → ${summary(lastGood)}`)
  }, 30_000)
})
