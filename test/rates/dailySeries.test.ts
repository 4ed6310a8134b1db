import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import type { ChartPoint } from "../../src/rates/CoinGeckoClient.ts"
import { changesFromSeries, DAY_MS, millisUntilNextDailyPoint, toDailySeries } from "../../src/rates/dailySeries.ts"

const day = (iso: string) => Date.parse(`${iso}T00:00:00Z`)

describe("toDailySeries", () => {
  it("drops the trailing 'now' point and keeps the daily closes, oldest first", () => {
    const points: Array<ChartPoint> = [
      [day("2026-11-20"), 1],
      [day("2026-11-21"), 2],
      [day("2026-11-22"), 3],
      [day("2026-11-22") + 10 * 3_600_000, 3.5]
    ]
    assert.deepStrictEqual(toDailySeries(points, 30), [[day("2026-11-20"), 1], [day("2026-11-21"), 2], [day("2026-11-22"), 3]])
  })

  it("keeps at most `days` points, the most recent ones", () => {
    const points: Array<ChartPoint> = [[day("2026-11-19"), 0], [day("2026-11-20"), 1], [day("2026-11-21"), 2], [day("2026-11-22"), 3]]
    assert.deepStrictEqual(toDailySeries(points, 2), [[day("2026-11-21"), 2], [day("2026-11-22"), 3]])
  })

  it("snaps closes a few seconds off midnight, sorts, de-duplicates days and skips null prices", () => {
    const points: Array<ChartPoint> = [
      [day("2026-11-21") + 4_000, 2],
      [day("2026-11-20") - 3_000, 1],
      [day("2026-11-21"), 2.5],
      [day("2026-11-19"), null],
      [day("2026-11-22"), 3]
    ]
    assert.deepStrictEqual(toDailySeries(points, 30), [[day("2026-11-20"), 1], [day("2026-11-21"), 2], [day("2026-11-22"), 3]])
  })

  it("a 'now' point exactly at midnight is a close and is kept", () => {
    assert.deepStrictEqual(toDailySeries([[day("2026-11-21"), 1], [day("2026-11-22"), 2]], 30), [[day("2026-11-21"), 1], [day("2026-11-22"), 2]])
  })

  it("whatever the input: at most `days` points, all at 00:00 UTC, strictly increasing", () =>
    fc.assert(fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 4_000_000_000_000 }), fc.option(fc.double({ noNaN: true, noDefaultInfinity: true }), { nil: null }))),
      fc.integer({ min: 1, max: 365 }),
      (points, days) => {
        const series = toDailySeries(points, days)
        assert.isAtMost(series.length, days)
        series.forEach(([t], i) => {
          assert.strictEqual(t % DAY_MS, 0)
          if (i > 0) assert.isAbove(t, series[i - 1]![0])
        })
      }
    )))
})

describe("millisUntilNextDailyPoint", () => {
  it("expires series when CoinGecko publishes the next close, at 00:35 UTC", () => {
    assert.strictEqual(millisUntilNextDailyPoint(Date.parse("2026-11-22T00:10:00Z")), 25 * 60_000)
    assert.strictEqual(millisUntilNextDailyPoint(Date.parse("2026-11-22T00:35:00Z")), DAY_MS)
    assert.strictEqual(millisUntilNextDailyPoint(Date.parse("2026-11-22T10:00:00Z")), (14 * 60 + 35) * 60_000)
  })
})

describe("changesFromSeries", () => {
  it("measures 24h/7d/30d from the closes, null when a close is missing", () => {
    const last = day("2026-11-22")
    const series = [[last - 7 * DAY_MS, 80], [last - DAY_MS, 200], [last, 100]] as const
    assert.deepStrictEqual(changesFromSeries(series), { "24h": -50, "7d": 25, "30d": null })
    assert.deepStrictEqual(changesFromSeries([]), { "24h": null, "7d": null, "30d": null })
  })
})
