/**
 * Issue 21's finding, as a test: the landing page's steady traffic on the shipped defaults (Demo, 10,000
 * credits a month) spent 2 to 4 upstream calls a minute, 9 to 17 times the plan. A simulated day of that
 * traffic, through the service over HTTP and the CoinGecko emulator (test/support/simulatedMonth.ts),
 * must spend at most a day's share of the month, answer 200 every time, with prices at most 15 minutes
 * old; as shipped (issue 28), the majors' prices at most 10 s old from Coinbase's feed and a long-tail
 * coin's at most 15 minutes. The whole month, and Basic's, is `npm run bench -- --month`. And when the month's credits are
 * spent, no call is made: nothing held is 503 with Retry-After, and `/readyz` does not care.
 */
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DurableCell } from "../../../src/platform/durableCell/DurableCell.ts"
import { makeMemoryCell } from "../../../src/platform/durableCell/memory.ts"
import { LEDGER } from "../../../src/rates/coingecko/credits/MonthlyBudget.ts"
import { monthOf, planFor } from "../../../src/rates/coingecko/credits/monthlyCredits.ts"
import * as Rates from "../../../src/rates/layer.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { simulateMonth } from "../../support/simulatedMonth.ts"

describe("the landing page over a simulated day, on Demo's credits", () => {
  it("spends at most a day's share of the month, every answer 200, prices at most 15 minutes old", async () => {
    const day = await simulateMonth(10_000, { days: 1, stepSeconds: 60 })
    expect(day.statuses).toEqual({ 200: day.requests })
    expect(day.credits).toBeLessThanOrEqual(10_000 / 30)
    // The ledger spends what CoinGecko bills: its answers 200 (issue 35).
    expect(day.ledgerCredits).toBe(day.credits)
    // Prices are refreshed as often as the pace allows: no fewer than two currencies' worth an hour.
    expect(day.credits).toBeGreaterThan(2 * 24)
    expect(day.oldestPricesSeconds).toBeLessThanOrEqual(15 * 60)
  }, 180_000)

  it("as shipped, with the majors live from Coinbase's feed (issue 28): every answer 200, majors' prices at most 10 s old, a long-tail coin's at most 15 minutes, within a day's share", async () => {
    const day = await simulateMonth(10_000, { days: 1, stepSeconds: 60, feed: true })
    expect(day.statuses).toEqual({ 200: day.requests })
    expect(day.credits).toBeLessThanOrEqual(10_000 / 30)
    expect(day.ledgerCredits).toBe(day.credits)
    expect(day.majorsFromCoinbase?.coinbase).toBe(day.majorsFromCoinbase?.all)
    expect(day.majorsOldestSeconds).toBeLessThanOrEqual(10)
    expect(day.longTailOldestSeconds).toBeLessThanOrEqual(15 * 60)
    console.info(`a simulated day as shipped: ${day.credits} credits, majors at most ${day.majorsOldestSeconds} s old (${day.majorsFromCoinbase?.coinbase} of ${day.majorsFromCoinbase?.all} answers from Coinbase), PEPE at most ${day.longTailOldestSeconds} s`)
  }, 180_000)
})

describe("the month's credits spent", () => {
  let emulator: CoinGeckoEmulator
  let app: TestApp
  beforeAll(async () => {
    emulator = await startCoinGeckoEmulator({ host: "127.0.0.1" })
    // Another instance spent everything a moment ago: the shared ledger holds no credit.
    const spentLedger = Layer.effect(
      DurableCell,
      Effect.gen(function*() {
        const cell = makeMemoryCell()
        const now = Date.now()
        yield* cell.compareAndSet(LEDGER, undefined, JSON.stringify({ lists: 0, cold: 0, refresh: 0, at: now, month: monthOf(now), spent: 10_000, billed: "answers" }))
        return cell
      })
    )
    const rates = Rates.layerTest({ env: { COINGECKO_BASE_URL: emulator.url }, cell: spentLedger })
    app = await startTestApp({ rates })
  })
  afterAll(async () => {
    await app?.close()
    await emulator?.close()
  })

  it("makes no call: nothing held is 503 with Retry-After until the next credit, and /readyz stays 200", async () => {
    const response = await fetch(`${app.url}/api/v1/exchange-rates`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ cryptos: ["BTC"] })
    })
    expect(response.status).toBe(503)
    expect((await response.json() as { code: string }).code).toBe("service_unavailable")
    const retryAfter = Number(response.headers.get("retry-after"))
    // Until a cold credit comes back, at the cold part's quarter of Demo's pace: about 18 minutes.
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(1 / planFor(10_000).rate.cold / 1000))
    expect(emulator.stats().total).toBe(0)
    expect((await fetch(`${app.url}/readyz`)).status).toBe(200)
  })
})
