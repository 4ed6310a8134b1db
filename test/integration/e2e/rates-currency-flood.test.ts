/**
 * Issue 28, point 3, as a test: one address asking `{"cryptos":["BTC"],"currency":C,"days":1}` once for
 * every currency CoinGecko supports (a request each, under any rate limit; the emulator has 13 of the real
 * API's 60 or so) must not stretch the landing page's refresh interval (CONTRACT C4 "Live quotes": what one
 * caller asks cannot lengthen the refresh of what others ask). Simulated hours of the landing page's
 * traffic on Demo (10,000 credits a month; CoinGecko alone), through the service over HTTP and the
 * CoinGecko emulator (test/support/simulatedMonth.ts), undisturbed and then with that flood every hour;
 * the usd unit's refresh interval, read from the emulator's `/coins/markets` calls in usd once the first
 * hour has passed, must stay within 10 % of the undisturbed one.
 */
import { describe, expect, it } from "vitest"
import { emulatedCurrencies } from "../../emulators/coingecko-data.ts"
import { type MonthResult, type SimulatedStep, simulateMonth } from "../../support/simulatedMonth.ts"

const HOUR_MS = 3_600_000
const MINUTE_MS = 60_000
const HOURS = 6
const STEP_SECONDS = 20
const FLOODER = "203.0.113.77"

/** The mean time between two refreshes of `currency`'s latest prices once the first hour has passed. */
const refreshInterval = (result: MonthResult, currency: string) => {
  const start = result.markets[0]?.at ?? 0
  const calls = result.markets.filter((call) => call.currency === currency && call.at >= start + HOUR_MS).map((call) => call.at)
  return { calls: calls.length, meanMs: calls.length < 2 ? Infinity : (calls.at(-1)! - calls[0]!) / (calls.length - 1) }
}

describe("one address asking every currency", () => {
  it("leaves the landing page's usd refresh interval within 10 % of its undisturbed value", async () => {
    const options = { stepSeconds: STEP_SECONDS, days: 0, hours: HOURS }
    const undisturbed = await simulateMonth(10_000, options)
    const statuses: Record<string, number> = {}
    let startedAt: number | undefined
    const flood = async ({ ask, now }: SimulatedStep) => {
      startedAt ??= now
      // A minute in, once the landing page's first cold fetches are done (at the very start both would race
      // for the calls of the first minute), and every hour after.
      if ((now - startedAt) % HOUR_MS !== MINUTE_MS) return
      await Promise.all([...emulatedCurrencies.keys()].map(async (currency) => {
        const { status } = await ask({ cryptos: ["BTC"], currency, days: 1 }, FLOODER)
        statuses[status] = (statuses[status] ?? 0) + 1
      }))
    }
    const flooded = await simulateMonth(10_000, { ...options, extra: flood })
    const before = refreshInterval(undisturbed, "usd")
    const after = refreshInterval(flooded, "usd")
    console.log(
      `usd refresh interval after the first hour: undisturbed ${(before.meanMs / 60_000).toFixed(2)} min (${before.calls} calls), ` +
        `flooded ${(after.meanMs / 60_000).toFixed(2)} min (${after.calls} calls), ratio ${(after.meanMs / before.meanMs).toFixed(3)}; ` +
        `flood answers ${JSON.stringify(statuses)}; wall ${undisturbed.wallSeconds} s + ${flooded.wallSeconds} s`
    )
    // The flood reached the service, every hour, in every currency.
    expect(Object.values(statuses).reduce((a, b) => a + b, 0)).toBe(HOURS * emulatedCurrencies.size)
    expect(undisturbed.statuses).toEqual({ 200: undisturbed.requests })
    expect(flooded.statuses).toEqual({ 200: flooded.requests })
    expect(before.calls).toBeGreaterThan(10)
    expect(after.meanMs / before.meanMs).toBeLessThanOrEqual(1.1)
    expect(after.meanMs / before.meanMs).toBeGreaterThanOrEqual(0.9)
  }, 120_000)
})
