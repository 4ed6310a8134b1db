import { assert, describe, it } from "@effect/vitest"
import { changesFromSeries, DAY_MS, millisUntilNextDailyPoint } from "../../../src/rates/dailySeries.ts"

const day = (iso: string) => Date.parse(`${iso}T00:00:00Z`)

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
