/**
 * Issue 21's finding, as a test: the landing page's steady traffic on the shipped defaults (Demo, 10,000
 * credits a month) spent 2 to 4 upstream calls a minute, 9 to 17 times the plan. A simulated day of that
 * traffic, through the service over HTTP and the CoinGecko emulator (test/support/simulatedMonth.ts),
 * must spend at most a day's share of the month, answer 200 every time, with prices at most 15 minutes
 * old. The whole month, and Basic's, is `npm run bench -- --month`.
 */
import { describe, expect, it } from "vitest"
import { simulateMonth } from "../support/simulatedMonth.ts"

describe("the landing page over a simulated day, on Demo's credits", () => {
  it("spends at most a day's share of the month, every answer 200, prices at most 15 minutes old", async () => {
    const day = await simulateMonth(10_000, { days: 1, stepSeconds: 60 })
    expect(day.statuses).toEqual({ 200: day.requests })
    expect(day.credits).toBeLessThanOrEqual(10_000 / 30)
    // Prices are refreshed as often as the pace allows: no fewer than two currencies' worth an hour.
    expect(day.credits).toBeGreaterThan(2 * 24)
    expect(day.oldestPricesSeconds).toBeLessThanOrEqual(15 * 60)
  }, 180_000)
})
