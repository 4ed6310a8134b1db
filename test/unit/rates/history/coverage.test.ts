/**
 * The arithmetic of src/rates/dailySeries.ts that history/DailyHistory.ts uses (and CoinGecko's closes, coingecko/dailyPoints.ts): which days a series needs, which of them are
 * missing from what is held, which upstream points are closes, and what a fetched range records.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { closesIn } from "../../../../src/rates/coingecko/dailyPoints.ts"
import { missingRanges, neededDays } from "../../../../src/rates/dailySeries.ts"
import { coveredBy } from "../../../../src/rates/history/DailyHistory.ts"

const DAY = 86_400_000
const T = Date.UTC(2026, 10, 22)
const d = (n: number) => T + n * DAY

describe("the days a series needs", () => {
  it("are the past 365 days up to the last close published (00:35 UTC the next day)", () => {
    expect(neededDays(T + 10 * 3_600_000, 365)).toEqual({ from: d(-364), to: d(0) })
    expect(neededDays(T + 35 * 60_000, 365)).toEqual({ from: d(-364), to: d(0) })
    expect(neededDays(T + 34 * 60_000, 365)).toEqual({ from: d(-364), to: d(-1) })
  })

  it("miss all of it when nothing adjacent is held, else only what lies before or after the coverage", () => {
    const need = { from: d(-364), to: d(0) }
    const held = (from: number, to: number) => ({ coveredFrom: d(from), coveredTo: d(to), points: [] })
    expect(missingRanges(undefined, need)).toEqual([need])
    expect(missingRanges(held(-400, -366), need)).toEqual([need])
    expect(missingRanges(held(-364, 0), need)).toEqual([])
    expect(missingRanges(held(-400, 0), need)).toEqual([])
    expect(missingRanges(held(-365, -1), need)).toEqual([{ from: d(0), to: d(0) }])
    expect(missingRanges(held(-30, -3), need)).toEqual([{ from: d(-364), to: d(-31) }, { from: d(-2), to: d(0) }])
  })
})

describe("a fetched range", () => {
  it("keeps the closes within a few minutes of midnight inside the range, not the trailing 'now'", () => {
    const range = { from: d(-2), to: d(0) }
    expect(closesIn([[d(-3), 1], [d(-2) + 4_000, 2], [d(-1) - 3_000, 3], [d(0), null], [d(0) + 10 * 3_600_000, 9]], range))
      .toEqual([[d(-2), 2], [d(-1), 3]])
  })

  it("whatever the upstream sends: closes inside the range, at 00:00 UTC, one a day, oldest first", () =>
    fc.assert(fc.property(
      fc.array(fc.tuple(fc.integer({ min: d(-40), max: d(40) }), fc.option(fc.double({ noNaN: true, noDefaultInfinity: true }), { nil: null }))),
      fc.integer({ min: -30, max: 0 }),
      (points, from) => {
        const range = { from: d(from), to: d(0) }
        const closes = closesIn(points, range)
        closes.forEach(([t], i) => {
          expect(t % DAY).toBe(0)
          expect(t >= range.from && t <= range.to).toBe(true)
          if (i > 0) expect(t).toBeGreaterThan(closes[i - 1]![0])
        })
      }
    )))

  it("records every day asked, but not a newest day answered without a point (it may only be late)", () => {
    const need = { from: d(-364), to: d(0) }
    const points = [[d(-2), 2], [d(-1), 3]] as const
    expect(coveredBy({ from: d(-2), to: d(0) }, points, need)).toEqual({ coveredFrom: d(-2), coveredTo: d(-1), points })
    expect(coveredBy({ from: d(-2), to: d(-1) }, points, need)).toEqual({ coveredFrom: d(-2), coveredTo: d(-1), points })
    // Days before the need's end are closed for good: asked is recorded, with or without points.
    expect(coveredBy({ from: d(-364), to: d(-100) }, [], need)).toEqual({ coveredFrom: d(-364), coveredTo: d(-100), points: [] })
    expect(coveredBy({ from: d(0), to: d(0) }, [], need)).toBeUndefined()
  })
})
