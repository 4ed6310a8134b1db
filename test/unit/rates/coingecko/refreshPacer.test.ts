/**
 * The refresh interval of latest prices (src/rates/coingecko/latestPrices.ts, the refresh pacer): the month's pace shared by
 * callers, one share each (RatesDemand, the same file), never faster than COINGECKO_LATEST_TTL_S, at most a week;
 * a unit's coins forgotten once they stop being asked. The arithmetic of the file's header, checked.
 */
import { describe, expect, it } from "vitest"
import { planFor } from "../../../../src/rates/coingecko/credits/monthlyCredits.ts"
import { makeRefreshPacer, MAX_INTERVAL_MS, PRICES_SHARE, unitIntervals } from "../../../../src/rates/coingecko/latestPrices.ts"
import { makeRatesDemand } from "../../../../src/rates/coingecko/latestPrices.ts"

const MINUTE = 60_000
const T0 = Date.parse("2026-11-25T12:00:00Z")
const DEMO = planFor(10_000).ratePerMs
const R = PRICES_SHARE * DEMO
/** Sixty currencies, as CoinGecko quotes about that many. */
const SIXTY = ["usd", "eur", ...Array.from({ length: 58 }, (_, i) => `c${i}`)]

/** A pacer over a demand of its own, both on a clock the test sets. */
const setUp = (perMonth = 10_000) => {
  const clock = { now: T0 }
  const demand = makeRatesDemand(() => clock.now)
  const pacer = makeRefreshPacer({ minIntervalMs: 60_000, creditsPerMs: planFor(perMonth).ratePerMs, demand: demand.weights })
  /** `caller` asks `ids` in each of `currencies` now: noted by the use case, then by the latest prices. */
  const ask = (caller: string, currencies: ReadonlyArray<string>, ids: ReadonlyArray<string> = ["bitcoin"]) => {
    for (const currency of currencies) {
      demand.note(caller, currency)
      pacer.note(currency, ids, clock.now)
    }
  }
  /** The landing page: 200 addresses, each asking usd and eur (as its three queries, over time). */
  const landing = () => {
    for (let i = 0; i < 200; i++) ask(`ip:198.51.100.${i}`, ["usd", "eur"], ["bitcoin", "ethereum"])
  }
  return { clock, demand, pacer, ask, landing }
}

describe("refresh pacer: one caller, one share", () => {
  it("the landing page on Demo (200 addresses asking usd and eur): 2 / R, 10.1 minutes, as when units shared equally; Basic: the TTL", () => {
    const demo = setUp()
    demo.landing()
    expect(demo.pacer.interval("usd", T0)).toBe(Math.ceil(2 / R))
    expect(demo.pacer.interval("eur", T0)).toBe(Math.ceil(2 / R))
    expect(demo.pacer.interval("usd", T0) / MINUTE).toBeCloseTo(10.12, 2)
    const basic = setUp(100_000)
    basic.ask("ip:198.51.100.1", ["usd"])
    expect(basic.pacer.interval("usd", T0)).toBe(60_000) // the pace would allow 30 s: never faster than the TTL
  })

  it("one address asking every currency lengthens the landing page's interval by 3 % on Demo, 0.5 % on Basic", () => {
    // Demo: its 58 currencies of its own get a sixtieth of one share among 201, less than a refresh a week:
    // a week each, those weekly refreshes taken off the pace; usd and eur share the rest with 1/60 more each.
    const demo = setUp()
    demo.landing()
    const undisturbed = demo.pacer.interval("usd", T0)
    demo.ask("ip:203.0.113.77", SIXTY)
    expect(demo.pacer.interval("c7", T0)).toBe(MAX_INTERVAL_MS)
    const flooded = demo.pacer.interval("usd", T0)
    expect(flooded).toBe(Math.ceil((201 - 58 / 60) / ((R - 58 / MAX_INTERVAL_MS) * (100 + 1 / 60))))
    expect(flooded / undisturbed).toBeCloseTo(1.030, 3)
    // Basic: a sixtieth of a share still buys more than a refresh a week (4.2 days); usd gets 201 / 200.0167.
    const basic = setUp(100_000)
    basic.landing()
    const before = basic.pacer.interval("usd", T0)
    basic.ask("ip:203.0.113.77", SIXTY)
    expect(basic.pacer.interval("c7", T0) / 86_400_000).toBeCloseTo(4.24, 2)
    expect(basic.pacer.interval("usd", T0) / before).toBeCloseTo(201 / 200.0333, 3)
  })

  it("a lone caller has the whole pace: 1 / R, about 5 minutes on Demo", () => {
    const { ask, pacer } = setUp()
    ask("ip:198.51.100.1", ["jpy"])
    expect(pacer.interval("jpy", T0)).toBe(Math.ceil(1 / R))
    expect(pacer.interval("jpy", T0) / MINUTE).toBeCloseTo(5.06, 2)
  })

  it("from ten callers on, one more lengthens the others' intervals by a tenth at most, whatever it asks", () => {
    const ten = setUp()
    for (let i = 0; i < 10; i++) ten.ask(`ip:198.51.100.${i}`, ["usd"])
    const alone = ten.pacer.interval("usd", T0)
    expect(alone).toBe(Math.ceil(1 / R))
    // One more caller, another currency: (N + 1) / N.
    ten.ask("ip:203.0.113.1", ["eur"])
    expect(ten.pacer.interval("usd", T0) / alone).toBeCloseTo(1.1, 4)
    // Or every currency: still within the tenth.
    const flood = setUp()
    for (let i = 0; i < 10; i++) flood.ask(`ip:198.51.100.${i}`, ["usd"])
    flood.ask("ip:203.0.113.1", SIXTY)
    expect(flood.pacer.interval("usd", T0) / alone).toBeLessThanOrEqual(1.1)
    // Below ten callers the bound is (N + 1) / N: two callers share the pace in halves.
    const one = setUp()
    one.ask("ip:198.51.100.1", ["usd"])
    one.ask("ip:198.51.100.2", ["eur"])
    expect(one.pacer.interval("usd", T0) / alone).toBeCloseTo(2, 4)
  })

  it("a unit of more than 250 coins costs a call per 250: its interval grows with its calls", () => {
    const { ask, pacer } = setUp()
    ask("ip:198.51.100.1", ["usd"])
    ask("ip:198.51.100.2", ["eur"], Array.from({ length: 300 }, (_, i) => `coin-${i}`))
    expect(pacer.interval("eur", T0)).toBe(2 * pacer.interval("usd", T0))
  })

  it("units past the week's cap are capped, their weekly refreshes taken off the pace before the rest is shared", () => {
    const options = { minIntervalMs: 60_000, ratePerMs: R }
    const week = MAX_INTERVAL_MS
    // Two popular units, and ten asked by one caller among 1,000 spreading itself over them.
    const units = [
      { currency: "usd", calls: 1, weight: 500 },
      { currency: "eur", calls: 1, weight: 499 },
      ...Array.from({ length: 10 }, (_, i) => ({ currency: `c${i}`, calls: 1, weight: 0.1 }))
    ]
    const intervals = unitIntervals(units, options)
    expect(intervals.get("c0")).toBe(week)
    const left = R - 10 / week
    expect(intervals.get("usd")).toBe(Math.ceil(999 / (left * 500)))
    // Asked by nobody within the window: the week, and no cost (it is refreshed only when read).
    const idle = unitIntervals([{ currency: "usd", calls: 1, weight: 1 }, { currency: "gbp", calls: 1, weight: 0 }], options)
    expect(idle.get("gbp")).toBe(week)
    expect(idle.get("usd")).toBe(Math.ceil(1 / R))
  })
})

describe("refresh pacer: the coins of a unit", () => {
  it("refreshes a currency's coins together, most recently asked first", () => {
    const { clock, pacer } = setUp()
    pacer.note("usd", ["bitcoin", "ethereum"], T0)
    clock.now = T0 + MINUTE
    pacer.note("usd", ["solana", "bitcoin"], T0 + MINUTE)
    expect(pacer.unit("usd", T0 + MINUTE)).toEqual(["bitcoin", "solana", "ethereum"])
    expect(pacer.unit("eur", T0 + MINUTE)).toEqual([])
  })

  it("forgets a caller and a currency no longer asked, and the intervals shorten again", () => {
    const { ask, clock, pacer } = setUp()
    ask("ip:198.51.100.1", ["usd"])
    ask("ip:198.51.100.2", ["eur"])
    const two = pacer.interval("usd", T0)
    clock.now = T0 + 40 * MINUTE
    ask("ip:198.51.100.1", ["usd"])
    expect(pacer.interval("usd", clock.now)).toBe(Math.ceil(1 / R))
    expect(two).toBe(Math.ceil(2 / R))
    expect(pacer.unit("eur", clock.now)).toEqual([])
  })

  it("keeps a currency's coins for three of its intervals when they are longer than half an hour", () => {
    const { ask, clock, pacer } = setUp()
    for (let i = 0; i < 8; i++) ask(`ip:198.51.100.${i}`, ["usd"])
    ask("ip:198.51.100.99", ["jpy"])
    const interval = pacer.interval("jpy", T0)
    expect(interval).toBe(Math.ceil(9 / R))
    expect(interval).toBeGreaterThan(30 * MINUTE)
    // Answered from memory meanwhile (callers counted at the edge), its coins are still its unit's.
    clock.now = T0 + interval + MINUTE
    for (let i = 0; i < 8; i++) ask(`ip:198.51.100.${i}`, ["usd"])
    expect(pacer.unit("jpy", clock.now)).toEqual(["bitcoin"])
  })
})
