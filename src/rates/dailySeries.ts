/** Pure helpers for daily series (CONTRACT C4: points at 00:00 UTC, oldest first): day arithmetic; the kept history's (history/) validation and merge. */
import { Duration, type Effect } from "effect"

export const DAY_MS = 86_400_000
/** CoinGecko publishes the previous day's 00:00 UTC point at 00:35 UTC. */
const DAILY_POINT_PUBLISHED_AFTER_MS = 35 * 60_000

export type DailyPoint = readonly [epochMs: number, price: number]
export const startOfDay = (epochMs: number): number => Math.floor(epochMs / DAY_MS) * DAY_MS

/** How long a cached series stays complete: until the next daily point is published upstream. */
export const millisUntilNextDailyPoint = (now: number): number => {
  const dayStart = startOfDay(now)
  const nextPublication = dayStart + DAILY_POINT_PUBLISHED_AFTER_MS
  return (now < nextPublication ? nextPublication : nextPublication + DAY_MS) - now
}

/** When the daily point stamped `day` (00:00 UTC) is published: at 00:35 UTC the next day. */
const publishedAt = (day: number): number => day + DAY_MS + DAILY_POINT_PUBLISHED_AFTER_MS

/** 00:00 UTC of the newest daily point published at `now` (the previous day's until 00:35 UTC). */
export const lastPublishedDay = (now: number): number => {
  const dayStart = startOfDay(now)
  return now < dayStart + DAILY_POINT_PUBLISHED_AFTER_MS ? dayStart - DAY_MS : dayStart
}

const percentChange = (from: number | undefined, to: number): number | null =>
  from === undefined || from === 0 ? null : ((to - from) / from) * 100

/** % changes from the closes 1, 7 and 30 days before the last point to it (when no latest price is had). */
export const changesFromSeries = (series: ReadonlyArray<DailyPoint>) => {
  const last = series.at(-1)
  if (last === undefined) return { "24h": null, "7d": null, "30d": null }
  const byDay = new Map(series)
  const back = (days: number) => percentChange(byDay.get(last[0] - days * DAY_MS), last[1])
  return { "24h": back(1), "7d": back(7), "30d": back(30) }
}

/** % changes over 7 and 30 days to a price observed at `at` (a live quote), from the point nearest `at` minus that many days. */
export const changesToPrice = (series: ReadonlyArray<DailyPoint>, price: number, at: number) => {
  const byDay = new Map(series)
  const back = (days: number) => percentChange(byDay.get(startOfDay(at - days * DAY_MS + DAY_MS / 2)), price)
  return { "7d": back(7), "30d": back(30) }
}

// The kept history (history/): a store only keeps and hands back; which days are valid is decided here.

export interface HeldSeries {
  /** Epoch ms at 00:00 UTC of the first and the last closed day fetched from this source: every day in between was asked for, with or without a point. */
  readonly coveredFrom: number
  readonly coveredTo: number
  /** One per day, at 00:00 UTC, oldest first. */
  readonly points: ReadonlyArray<readonly [day: number, price: number]>
}

/** A series as a store hands it back, before validation: whatever was written, or tampered with. */
export interface StoredSeries {
  readonly coveredFrom: unknown
  readonly coveredTo: unknown
  readonly points: ReadonlyArray<readonly [unknown, unknown]>
}

/** One series: a coin in a currency from a source (`Source`: upstream.ts `SourceName`, not imported here: no circle through testRates.ts). */
export interface SeriesId<Source extends string = string> {
  readonly coin: string
  readonly currency: string
  readonly source: Source
}

export const seriesKey = ({ coin, currency, source }: SeriesId) => `${source}/${currency}/${coin}`

/** The store's side: keep and hand back. `E` is the store's own failure (a file's, PostgreSQL's). */
export interface SeriesStore<E> {
  readonly read: (id: SeriesId) => Effect.Effect<StoredSeries | undefined, E>
  /** Adds the days of `added` (validated): a day already held is kept (first write wins), the coverage becomes the hull. */
  readonly write: (id: SeriesId, added: HeldSeries) => Effect.Effect<void, E>
}

const isDay = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value) && value % DAY_MS === 0
const isPrice = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value) && value > 0

/** What was read, as promised: ascending days at 00:00 UTC, positive prices, coverage to `lastDay`; a bad day ends the coverage before it (`dropped`). */
export const validSeries = (
  stored: StoredSeries,
  lastDay = Number.POSITIVE_INFINITY
): { readonly series: HeldSeries; readonly dropped: ReadonlyArray<string> } | undefined => {
  const { coveredFrom } = stored
  if (!isDay(coveredFrom) || !isDay(stored.coveredTo) || coveredFrom > stored.coveredTo) return undefined
  let coveredTo: number = stored.coveredTo
  const dropped: Array<string> = []
  if (coveredTo > lastDay) {
    // A day not closed yet cannot have been asked: a clock that ran ahead wrote it.
    dropped.push(`coverage to ${dayName(coveredTo)}, after ${dayName(lastDay)}`)
    coveredTo = lastDay
  }
  const points: Array<readonly [number, number]> = []
  for (const [day, price] of stored.points) {
    const inside = typeof day === "number" && day >= coveredFrom && day <= coveredTo
    if (!inside && isDay(day)) continue
    const last = points.at(-1)?.[0]
    if (isDay(day) && isPrice(price) && (last === undefined || day > last)) {
      points.push([day, price])
      continue
    }
    dropped.push(`${isDay(day) ? dayName(day) : String(day)}: ${String(price)}`)
    coveredTo = Math.min(coveredTo, isDay(day) ? day - DAY_MS : coveredFrom - DAY_MS)
  }
  if (coveredTo < coveredFrom) return undefined
  return { series: { coveredFrom, coveredTo, points: points.filter(([day]) => day <= coveredTo) }, dropped }
}

const dayName = (day: number) => new Date(day).toISOString().slice(0, 10)

/** The held series after a write of `added`: the hull of both coverages, a day already held kept (closed days never change). */
export const mergeHeld = (held: HeldSeries | undefined, added: HeldSeries): HeldSeries => {
  const byDay = new Map<number, number>(held?.points ?? [])
  for (const [day, price] of added.points) {
    if (isDay(day) && isPrice(price) && day >= added.coveredFrom && day <= added.coveredTo && !byDay.has(day)) byDay.set(day, price)
  }
  return {
    coveredFrom: held === undefined ? added.coveredFrom : Math.min(held.coveredFrom, added.coveredFrom),
    coveredTo: held === undefined ? added.coveredTo : Math.max(held.coveredTo, added.coveredTo),
    points: [...byDay].sort((a, b) => a[0] - b[0])
  }
}

/** Days at 00:00 UTC, both included. */
export interface DayRange {
  readonly from: number
  readonly to: number
}

/** The closed days a series of `days` points needs at `now`. */
export const neededDays = (now: number, days: number): DayRange => ({
  from: startOfDay(now) - (days - 1) * DAY_MS,
  to: lastPublishedDay(now)
})

/** The ranges of `need` outside what is held: one before it, one after it, or all of it. */
export const missingRanges = (held: HeldSeries | undefined, need: DayRange): Array<DayRange> => {
  if (need.from > need.to) return []
  // Nothing held, or nothing adjacent: the whole need (needs only move forward).
  if (held === undefined || held.coveredTo < need.from - DAY_MS || held.coveredFrom > need.to + DAY_MS) return [need]
  const ranges: Array<DayRange> = []
  if (held.coveredFrom > need.from) ranges.push({ from: need.from, to: held.coveredFrom - DAY_MS })
  if (held.coveredTo < need.to) ranges.push({ from: held.coveredTo + DAY_MS, to: need.to })
  return ranges
}


export const pointsWithin = (points: ReadonlyArray<DailyPoint>, need: DayRange): ReadonlyArray<DailyPoint> =>
  points.filter(([day]) => day >= need.from && day <= need.to)

/** A coin missing upstream may be listed later: asked again after an hour rather than on every request. */
const MISSING_SERIES_MS = 3_600_000
const MAX_SERIES_GRACE_MS = 3_600_000
/** A newest close published late is asked again this often, for this long after it was due. */
const LATE_CLOSE_RETRY_MS = 15 * 60_000
const LATE_CLOSE_WINDOW_MS = 6 * 3_600_000

/**
 * How long a series stored at `storedAt` is held (the copies' timing): past points never change, so until
 * the next daily point, or sooner while the newest close is late; a series not found (null), an hour.
 */
export const seriesTiming = (series: ReadonlyArray<DailyPoint> | null, storedAt: number) => {
  if (series === null) return { ttl: Duration.millis(MISSING_SERIES_MS), refreshAhead: Duration.zero, grace: Duration.zero }
  let ttl = millisUntilNextDailyPoint(storedAt)
  const newest = lastPublishedDay(storedAt)
  const late = series.at(-1)?.[0] === newest - DAY_MS && storedAt < publishedAt(newest) + LATE_CLOSE_WINDOW_MS
  if (late) ttl = Math.min(ttl, LATE_CLOSE_RETRY_MS)
  return { ttl: Duration.millis(ttl), refreshAhead: Duration.zero, grace: Duration.millis(Math.min(ttl, MAX_SERIES_GRACE_MS)) }
}
