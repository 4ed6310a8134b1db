/**
 * Pure helpers for daily price series (CONTRACT C4: daily points at 00:00 UTC, oldest first).
 */

export const DAY_MS = 86_400_000

/** CoinGecko publishes the previous day's 00:00 UTC point at 00:35 UTC. */
const DAILY_POINT_PUBLISHED_AFTER_MS = 35 * 60_000

export type DailyPoint = readonly [epochMs: number, price: number]

/** 00:00 UTC of the day containing `epochMs`. */
export const startOfDay = (epochMs: number): number => Math.floor(epochMs / DAY_MS) * DAY_MS

/** How long a cached series stays complete: until the next daily point is published upstream. */
export const millisUntilNextDailyPoint = (now: number): number => {
  const dayStart = startOfDay(now)
  const nextPublication = dayStart + DAILY_POINT_PUBLISHED_AFTER_MS
  return (now < nextPublication ? nextPublication : nextPublication + DAY_MS) - now
}

/** When the daily point stamped `day` (00:00 UTC) is published: at 00:35 UTC the next day. */
export const publishedAt = (day: number): number => day + DAY_MS + DAILY_POINT_PUBLISHED_AFTER_MS

/** 00:00 UTC of the newest daily point published at `now` (the previous day's until 00:35 UTC). */
export const lastPublishedDay = (now: number): number => {
  const dayStart = startOfDay(now)
  return now < dayStart + DAILY_POINT_PUBLISHED_AFTER_MS ? dayStart - DAY_MS : dayStart
}

const percentChange = (from: number | undefined, to: number): number | null =>
  from === undefined || from === 0 ? null : ((to - from) / from) * 100

/**
 * % changes measured on the series itself, for when the upstream's latest-price data is unavailable:
 * from the close 1, 7 and 30 days before the last point to the last point.
 */
export const changesFromSeries = (series: ReadonlyArray<DailyPoint>) => {
  const last = series.at(-1)
  if (last === undefined) return { "24h": null, "7d": null, "30d": null }
  const byDay = new Map(series)
  const back = (days: number) => percentChange(byDay.get(last[0] - days * DAY_MS), last[1])
  return { "24h": back(1), "7d": back(7), "30d": back(30) }
}

/**
 * % changes over 7 and 30 days of a price observed at `at` (a live quote), measured on the series: from
 * the daily point nearest to `at` minus that many days (the feed gives the 24 h change only).
 */
export const changesToPrice = (series: ReadonlyArray<DailyPoint>, price: number, at: number) => {
  const byDay = new Map(series)
  const back = (days: number) => percentChange(byDay.get(startOfDay(at - days * DAY_MS + DAY_MS / 2)), price)
  return { "7d": back(7), "30d": back(30) }
}
