/**
 * The refresh interval of latest prices (src/rates/refreshPacer.ts): the units of demand share the
 * month's pace, never faster than COINGECKO_LATEST_TTL_S, and the demand is forgotten once it stops.
 */
import { describe, expect, it } from "vitest"
import { planFor } from "../../../src/rates/coingecko/credits/monthlyCredits.ts"
import { makeRefreshPacer, PRICES_SHARE } from "../../../src/rates/coingecko/refreshPacer.ts"

const MINUTE = 60_000
const T0 = Date.parse("2026-11-25T12:00:00Z")
const pacerFor = (perMonth: number) => makeRefreshPacer({ minIntervalMs: 60_000, creditsPerMs: planFor(perMonth).ratePerMs })

describe("refresh pacer", () => {
  it("shares the pace between the currencies asked: the landing page on Demo and on Basic", () => {
    const demo = pacerFor(10_000)
    demo.note("usd", ["bitcoin", "ethereum", "solana"], T0)
    demo.note("usd", ["bitcoin"], T0)
    demo.note("eur", ["bitcoin", "ethereum"], T0)
    expect(demo.interval(T0)).toBe(Math.ceil(2 / (PRICES_SHARE * planFor(10_000).ratePerMs)))
    expect(demo.interval(T0) / MINUTE).toBeCloseTo(10.12, 2)
    const basic = pacerFor(100_000)
    basic.note("usd", ["bitcoin"], T0)
    expect(basic.interval(T0)).toBe(60_000) // the pace would allow 30 s: never faster than the TTL
  })

  it("refreshes a currency's coins together, most recently asked first", () => {
    const pacer = pacerFor(10_000)
    pacer.note("usd", ["bitcoin", "ethereum"], T0)
    pacer.note("usd", ["solana", "bitcoin"], T0 + MINUTE)
    expect(pacer.unit("usd", T0 + MINUTE)).toEqual(["bitcoin", "solana", "ethereum"])
    expect(pacer.unit("eur", T0 + MINUTE)).toEqual([])
  })

  it("forgets a currency no longer asked, and the interval shortens again", () => {
    const pacer = pacerFor(10_000)
    pacer.note("usd", ["bitcoin"], T0)
    pacer.note("eur", ["bitcoin"], T0)
    const two = pacer.interval(T0)
    pacer.note("usd", ["bitcoin"], T0 + 40 * MINUTE)
    expect(pacer.interval(T0 + 40 * MINUTE)).toBe(Math.ceil(two / 2))
    expect(pacer.unit("eur", T0 + 40 * MINUTE)).toEqual([])
  })

  it("keeps a currency for three intervals when they are longer than half an hour", () => {
    const pacer = pacerFor(10_000)
    const currencies = ["usd", "eur", "gbp", "jpy", "chf", "cad", "aud", "sek"]
    for (const currency of currencies) pacer.note(currency, ["bitcoin"], T0)
    const interval = pacer.interval(T0)
    expect(interval).toBeGreaterThan(30 * MINUTE)
    // Asked once an interval (answers are repeated until due): still counted, the interval holds.
    const later = T0 + interval + MINUTE
    expect(pacer.unit("usd", later)).toEqual(["bitcoin"])
    expect(pacer.interval(later)).toBe(interval)
  })
})
