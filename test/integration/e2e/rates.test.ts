/**
 * POST /api/v1/exchange-rates end to end: the HTTP app over a socket, the live CoinGecko Layer
 * with its production timeouts, and the CoinGecko emulator over real HTTP (CONTRACT C4).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type CoinGeckoEmulator, type FaultMode, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { emulatedDailyPrices, emulatedPrice, startOfUtcDay } from "../../emulators/coingecko-data.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { expectProblem } from "../../support/problems.ts"
import * as Rates from "../../../src/rates/layer.ts"
import { PLENTY } from "../../support/credits.ts"
import { measureStalls } from "../../support/ownTime.ts"

let emulator: CoinGeckoEmulator
let app: TestApp
const NOW = Date.UTC(2026, 10, 22, 10, 30)

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
  // Production settings but for the breaker, which would otherwise open during the fault matrix.
  const rates = Rates.layerTest({ env: { COINGECKO_BASE_URL: emulator.url, COINGECKO_BREAKER_FAILURES: "1000", COINGECKO_CALLS_PER_MIN: "10000" } })
  app = await startTestApp({ rates })
})
afterAll(async () => {
  await app.close()
  await emulator.close()
})
beforeEach(() => emulator.setFault("none"))

const rates = (body: unknown) =>
  fetch(`${app.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })

const chartCalls = (coin: string) => emulator.stats().byPath[`/coins/${coin}/market_chart/range`] ?? 0

describe("exchange rates against the CoinGecko emulator", () => {
  it("returns the emulator's daily closes and latest price for several coins and currencies", async () => {
    for (const [currency, days] of [["usd", 30], ["eur", 7], ["jpy", 90]] as const) {
      const res = await rates({ cryptos: ["btc", "ETH", "sol", "NOPE"], currency, days })
      expect(res.status).toBe(200)
      const body = await res.json()
      expect(body.currency).toBe(currency.toUpperCase())
      expect(body.unknown).toEqual(["NOPE"])
      expect(body.rates.map((r: { id: string }) => r.id)).toEqual(["bitcoin", "ethereum", "solana"])
      for (const rate of body.rates) {
        const expected = emulatedDailyPrices(rate.id, currency, days, NOW).slice(0, -1) // the trailing "now" point is dropped
        expect(rate.series).toHaveLength(days)
        expect(rate.series).toEqual(expected)
        expect(rate.series.at(-1)[0]).toBe(startOfUtcDay(NOW))
        expect(rate.series.every(([t]: [number]) => t % 86_400_000 === 0)).toBe(true)
        expect(rate.price).toBeCloseTo(emulatedPrice(rate.id, currency, NOW), 6)
      }
    }
  })

  it("makes one upstream call per coin for 50 concurrent identical cold requests, none when warm", async () => {
    const body = { cryptos: ["LTC", "DOGE", "ADA"], currency: "gbp", days: 14 }
    emulator.resetStats()
    const cold = await Promise.all(Array.from({ length: 50 }, () => rates(body)))
    expect(cold.every((r) => r.status === 200)).toBe(true)
    const perCoin = ["litecoin", "dogecoin", "cardano"].map(chartCalls)
    expect(perCoin).toEqual([1, 1, 1])
    const coldTotal = emulator.stats().total
    const warm = await Promise.all(Array.from({ length: 50 }, () => rates(body)))
    expect(warm.every((r) => r.status === 200)).toBe(true)
    expect(emulator.stats().total).toBe(coldTotal)
    console.log(`upstream calls for 50 cold requests: ${JSON.stringify(emulator.stats().byPath)}; 50 warm: 0`)
  })

  it("serves a cached coin with stale: true during an outage", async () => {
    // Its own service, whose latest prices live 1 s (COINGECKO_LATEST_TTL_S): then the upstream goes down.
    const shortLived = await startTestApp({
      rates: Rates.layerTest({ env: { COINGECKO_BASE_URL: emulator.url, COINGECKO_LATEST_TTL_S: "1", COINGECKO_CALLS_PER_MONTH: PLENTY } })
    })
    try {
      const post = (body: unknown) =>
        fetch(`${shortLived.url}/api/v1/exchange-rates`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
      const body = { cryptos: ["DOT"], currency: "usd", days: 7 }
      const fresh = await (await post(body)).json()
      expect(fresh.stale).toBe(false)
      emulator.setFault("5xx")
      // Past its lifetime and as long again (while it is served and refreshed behind): a last good copy.
      await new Promise((r) => setTimeout(r, 2_200))
      const during = await post(body)
      expect(during.status).toBe(200)
      const stale = await during.json()
      expect(stale.stale).toBe(true)
      expect(stale.rates[0].series).toEqual(fresh.rates[0].series)
    } finally {
      await shortLived.close()
    }
  })

  // Last: a 429 makes the service hold off the upstream for its Retry-After, as CoinGecko asks.
  const faults: Array<[FaultMode, number, string]> = [
    ["5xx", 502, "upstream_error"],
    ["hang", 502, "upstream_error"],
    ["reset", 502, "upstream_error"],
    ["truncated", 502, "upstream_error"],
    ["wrong-shape", 502, "upstream_error"],
    ["401", 502, "upstream_error"],
    ["429", 503, "service_unavailable"],
    ["429-no-retry-after", 503, "service_unavailable"],
    ["429-html", 503, "service_unavailable"]
  ]
  it.each(faults)("fault %s on a cold coin → %i %s within 10 s, and the process stays healthy", async (mode, status, code) => {
    emulator.setFault(mode)
    // The service runs in this process: time it held no thread (a starved machine) is the machine's, not the service's.
    const stalled = measureStalls()
    const started = Date.now()
    const res = await rates({ cryptos: ["XRP"], currency: "chf", days: 3 })
    const elapsed = Date.now() - started
    const stalledMs = stalled()
    await expectProblem(res, status, code)
    expect(elapsed - stalledMs).toBeLessThan(10_000)
    if (status === 503) expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0)
    if (mode === "429") expect(res.headers.get("retry-after")).toBe("7")
    emulator.setFault("none")
    expect((await fetch(`${app.url}/api/health`)).status).toBe(200)
  }, 20_000)

})
