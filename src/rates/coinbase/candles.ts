/**
 * Pure helpers for Coinbase's daily candles: the ranges a call may ask (at most 300 candles), and the
 * candles read into daily closes.
 *
 * A candle is stamped with the start of its day (00:00 UTC) and closes at the end of it. CoinGecko's
 * daily point stamped 00:00 UTC is the price at that instant (../dailySeries.ts), that is the
 * close of the day before: `asMidnightPoints` restamps closes that way, so that points of both sources
 * for the same instant can be compared or merged.
 *
 * Which candles are closed is judged by Coinbase's clock (`coinbaseNow`), never ours: a point is kept
 * for ever once written, so a clock of ours running ahead must not turn today's moving candle into one.
 */
import { DAY_MS } from "../dailySeries.ts"
import type { Candle } from "./responses.ts"

/** Candles one call may return (Coinbase rejects a wider range with a 400). */
const MAX_CANDLES_PER_CALL = 300

/** Coinbase's daily granularity, in seconds. */
export const DAILY_GRANULARITY_S = 86_400

/** A daily close: `[epoch ms at 00:00 UTC of the candle's day, close]`. */
export type DailyClose = readonly [day: number, close: number]

/**
 * `[fromDay, toDay]` (both included, 00:00 UTC) cut into consecutive ranges of at most `perCall` days,
 * oldest first.
 */
export const dayWindows = (fromDay: number, toDay: number, perCall = MAX_CANDLES_PER_CALL): Array<readonly [number, number]> => {
  const windows: Array<readonly [number, number]> = []
  for (let start = fromDay; start <= toDay; start += perCall * DAY_MS) {
    windows.push([start, Math.min(toDay, start + (perCall - 1) * DAY_MS)])
  }
  return windows
}

/**
 * Candles (newest first, as Coinbase sends them, possibly of several calls) → closes of the days in
 * `[fromDay, toDay]`, oldest first, one per day. Coinbase may send candles before the range asked:
 * they are dropped. A day without trades has no candle and stays missing: no point is invented.
 * Returns the stamp of a candle that is not at 00:00 UTC, if any (a wrong answer, not a close).
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

/**
 * Coinbase's time when it answered: the latest of its answers' `Date` headers (`dates`); lacking any, the
 * start of its newest candle, taken to be today's, still moving.
 */
export const coinbaseNow = (dates: ReadonlyArray<number>, candles: ReadonlyArray<Candle>): number =>
  dates.length > 0 ? Math.max(...dates) : candles.reduce((newest, [timeSeconds]) => Math.max(newest, timeSeconds * 1000), 0)

/**
 * Closes restamped as the price at the following 00:00 UTC (CoinGecko's daily points), for the days
 * closed at `asOf`, Coinbase's time (`coinbaseNow`): today's candle is still moving and is not a daily point.
 */
export const asMidnightPoints = (closes: ReadonlyArray<DailyClose>, asOf: number): Array<DailyClose> =>
  closes.filter(([day]) => day + DAY_MS <= asOf).map(([day, close]) => [day + DAY_MS, close] as const)

/** % change over 24 hours from Coinbase's stats: from `open` (24 h ago) to `last`. */
export const change24h = (stats: { readonly open: number; readonly last: number }): number =>
  ((stats.last - stats.open) / stats.open) * 100
