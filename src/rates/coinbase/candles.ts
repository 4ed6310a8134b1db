/**
 * Coinbase's daily candles: each, stamped 00:00 UTC of its day, closes at its end, while CoinGecko's 00:00 UTC
 * point (../dailySeries.ts) is the day before's close. Closed days are judged by Coinbase's clock, never ours.
 */
import { DAY_MS } from "../dailySeries.ts"
import type { Candle } from "./responses.ts"

/** Candles one call may return (Coinbase rejects a wider range with a 400). */
const MAX_CANDLES_PER_CALL = 300
export const DAILY_GRANULARITY_S = 86_400
/** A daily close: `[epoch ms at 00:00 UTC of the candle's day, close]`. */
export type DailyClose = readonly [day: number, close: number]
/** `[fromDay, toDay]` (both included, 00:00 UTC) cut into ranges of at most `perCall` days, oldest first. */
export const dayWindows = (fromDay: number, toDay: number, perCall = MAX_CANDLES_PER_CALL): Array<readonly [number, number]> => {
  const windows: Array<readonly [number, number]> = []
  for (let start = fromDay; start <= toDay; start += perCall * DAY_MS) {
    windows.push([start, Math.min(toDay, start + (perCall - 1) * DAY_MS)])
  }
  return windows
}
/**
 * Candles (newest first, of one or more calls) → one close per day in `[fromDay, toDay]`, oldest first; a day
 * without trades stays missing. `offMidnight`: a stamp not at 00:00 UTC, if any (a wrong answer).
 */
export const dailyCloses = (
  candles: ReadonlyArray<Candle>,
  fromDay: number,
  toDay: number
): { readonly closes: Array<DailyClose>; readonly offMidnight: number | undefined } => {
  const byDay = new Map<number, number>()
  for (const [timeSeconds, , , , close] of candles) {
    const day = timeSeconds * 1000
    if (day % DAY_MS !== 0) return { closes: [], offMidnight: day }
    if (day >= fromDay && day <= toDay) byDay.set(day, close)
  }
  return { closes: [...byDay].sort((a, b) => a[0] - b[0]), offMidnight: undefined }
}
/** Coinbase's time when it answered: its latest `Date` header, else its newest (today's) candle's start. */
export const coinbaseNow = (dates: ReadonlyArray<number>, candles: ReadonlyArray<Candle>): number =>
  dates.length > 0 ? Math.max(...dates) : candles.reduce((newest, [timeSeconds]) => Math.max(newest, timeSeconds * 1000), 0)
/** Closes restamped as the price at the next 00:00 UTC, for the days closed at `asOf` (Coinbase's time). */
export const asMidnightPoints = (closes: ReadonlyArray<DailyClose>, asOf: number): Array<DailyClose> =>
  closes.filter(([day]) => day + DAY_MS <= asOf).map(([day, close]) => [day + DAY_MS, close] as const)
/** % change over 24 hours from Coinbase's stats: from `open` (24 h ago) to `last`. */
export const change24h = (stats: { readonly open: number; readonly last: number }): number =>
  ((stats.last - stats.open) / stats.open) * 100
