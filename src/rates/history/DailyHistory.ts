/**
 * The kept history of daily points (CONTRACT C4 "Over a month"): a closed day's point never changes,
 * so it is fetched once, stored durably and shared by every instance; only days outside what is held
 * are asked of the source again.
 *
 * Per series (coin, currency, source): the days held, and the range of days already asked of the
 * source (`coveredFrom`..`coveredTo`), with or without a point (a coin listed later has none before).
 *
 * Implementations, each in its own file: memoryHistory.ts (tests), fileHistory.ts (under DATA_DIR),
 * postgresHistory.ts (DATABASE_URL); history.ts chooses among them.
 */
import { Context, Data, type Effect, type Option } from "effect"
import { DAY_MS } from "../dailySeries.ts"

export type HistorySource = "coingecko" | "coinbase"

export interface HeldSeries {
  /** Epoch ms at 00:00 UTC of the first and the last closed day fetched from this source: every day in between was asked for, with or without a point. */
  readonly coveredFrom: number
  readonly coveredTo: number
  /** One per day, at 00:00 UTC, oldest first. */
  readonly points: ReadonlyArray<readonly [day: number, price: number]>
}

/** The history could not be read or written (a file, PostgreSQL). Never holds data or the URL. */
export class HistoryError extends Data.TaggedError("HistoryError")<{
  readonly operation: string
  readonly reason: string
}> {
  override get message() {
    return `rates history: ${this.operation}: ${this.reason}`
  }
}

export interface DailyHistoryShape {
  readonly read: (coin: string, currency: string, source: HistorySource) => Effect.Effect<Option.Option<HeldSeries>, HistoryError>
  /** Adds days: coverage becomes the hull of the held and the new (callers write ranges adjacent to or overlapping what is held); a day already held is kept as is (closed days never change: first write wins). */
  readonly write: (coin: string, currency: string, source: HistorySource, series: HeldSeries) => Effect.Effect<void, HistoryError>
}

export class DailyHistory extends Context.Service<DailyHistory, DailyHistoryShape>()("app/rates/DailyHistory") {}

const isDay = (epochMs: number) => Number.isSafeInteger(epochMs) && epochMs % DAY_MS === 0

/** Whether `series` is what this module promises: days at 00:00 UTC, inside the coverage, oldest first, one each. */
export const isWellFormed = (series: HeldSeries): boolean =>
  isDay(series.coveredFrom) && isDay(series.coveredTo) && series.coveredFrom <= series.coveredTo &&
  series.points.every(([day, price], i) =>
    isDay(day) && Number.isFinite(price) && day >= series.coveredFrom && day <= series.coveredTo &&
    (i === 0 || day > series.points[i - 1]![0]))

/**
 * The held series after a write of `added` (points off the days or outside its coverage ignored):
 * the hull of both coverages, a day already held kept as is.
 */
export const mergeHeld = (held: HeldSeries | undefined, added: HeldSeries): HeldSeries => {
  const byDay = new Map<number, number>(held?.points ?? [])
  for (const [day, price] of added.points) {
    if (isDay(day) && Number.isFinite(price) && day >= added.coveredFrom && day <= added.coveredTo && !byDay.has(day)) {
      byDay.set(day, price)
    }
  }
  return {
    coveredFrom: held === undefined ? added.coveredFrom : Math.min(held.coveredFrom, added.coveredFrom),
    coveredTo: held === undefined ? added.coveredTo : Math.max(held.coveredTo, added.coveredTo),
    points: [...byDay].sort((a, b) => a[0] - b[0])
  }
}

/** The key of one series in memory and in logs. */
export const seriesKey = (coin: string, currency: string, source: HistorySource) => `${source}/${currency}/${coin}`
