/**
 * A series from the kept history first (DailyHistory.ts): only the days it lacks are asked of the
 * source, and what comes back is kept. A restart or a second instance therefore refetches nothing held,
 * and serves the held days while the source is down. The same for every source; each says how to ask
 * it for a range of closes (CoinGecko: `/coins/{id}/market_chart/range`; Coinbase: daily candles).
 *
 * The days needed at `now` run from `seriesDays - 1` days before today to the last published close
 * (dailySeries.ts `lastPublishedDay`). Coverage records the days asked (with or without a point), except
 * that a newest day answered without a point is not recorded: it may only be late, and is asked again.
 *
 * The store never fails a request the source can serve: a read that fails counts as nothing held, a
 * write that fails is skipped, and either is logged once until the store works again.
 */
import { Clock, Effect, Option } from "effect"
import { DAY_MS, type DailyPoint, lastPublishedDay, startOfDay } from "../dailySeries.ts"
import type { Charge, SourceError, SourceName } from "../upstream.ts"
import type { DailyHistoryShape, HeldSeries, HistoryError } from "./DailyHistory.ts"

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
  // Nothing held, or nothing adjacent: the whole need (the hull then spans days before the need,
  // which no later need asks for: needs only move forward).
  if (held === undefined || held.coveredTo < need.from - DAY_MS || held.coveredFrom > need.to + DAY_MS) return [need]
  const ranges: Array<DayRange> = []
  if (held.coveredFrom > need.from) ranges.push({ from: need.from, to: held.coveredFrom - DAY_MS })
  if (held.coveredTo < need.to) ranges.push({ from: held.coveredTo + DAY_MS, to: need.to })
  return ranges
}

/** What a fetched range adds to the history; undefined when nothing is to be recorded. */
export const coveredBy = (range: DayRange, closes: ReadonlyArray<DailyPoint>, need: DayRange): HeldSeries | undefined => {
  const newest = closes.at(-1)?.[0]
  if (range.to < need.to || newest === range.to) return { coveredFrom: range.from, coveredTo: range.to, points: closes }
  return newest === undefined ? undefined : { coveredFrom: range.from, coveredTo: newest, points: closes }
}

/** A series as its source knows it: a coin in a currency, and whatever else the source needs (a product id). */
export interface SeriesOf {
  readonly coin: string
  readonly currency: string
}

/** A source's closes of the days of `range` (points at 00:00 UTC inside it), paid by `charge`. */
export type FetchCloses<S extends SeriesOf> = (series: S, range: DayRange, now: number, charge: Charge) => Effect.Effect<ReadonlyArray<DailyPoint>, SourceError>

export interface KeptSeries<S extends SeriesOf> {
  /** The series at `now`: held days, and the missing ones fetched from the source and kept. */
  readonly fetch: (series: S, charge: Charge) => Effect.Effect<ReadonlyArray<DailyPoint>, SourceError>
  /** The held days of the series, when the source cannot serve the rest; none when nothing of the need is held. */
  readonly held: (series: S) => Effect.Effect<Option.Option<ReadonlyArray<DailyPoint>>>
}

export const makeKeptSeries = <S extends SeriesOf>(
  history: DailyHistoryShape,
  source: SourceName,
  options: { readonly seriesDays: number; readonly closes: FetchCloses<S> }
): KeptSeries<S> => {
  let failing = false
  const storeFailed = (error: HistoryError) =>
    Effect.suspend(() => {
      if (failing) return Effect.void
      failing = true
      return Effect.logWarning(`rates history unavailable; fetching from ${source} without it`, error.message)
    })
  const storeWorked = Effect.suspend(() => {
    if (!failing) return Effect.void
    failing = false
    return Effect.logInfo("rates history available again")
  })

  const readHeld = ({ coin, currency }: SeriesOf) =>
    history.read({ coin, currency, source }).pipe(
      Effect.tap(() => storeWorked),
      Effect.map(Option.getOrUndefined),
      Effect.catchTag("HistoryError", (error) => Effect.as(storeFailed(error), undefined))
    )

  const within = (points: ReadonlyArray<DailyPoint>, need: DayRange) => points.filter(([day]) => day >= need.from && day <= need.to)

  const fetch = (series: S, charge: Charge) =>
    Effect.gen(function*() {
      const { coin, currency } = series
      const now = yield* Clock.currentTimeMillis
      const need = neededDays(now, options.seriesDays)
      const held = yield* readHeld(series)
      const byDay = new Map<number, number>(held === undefined ? [] : within(held.points, need))
      for (const range of missingRanges(held, need)) {
        const closes = yield* options.closes(series, range, now, charge)
        for (const [day, price] of closes) if (!byDay.has(day)) byDay.set(day, price)
        const added = coveredBy(range, closes, need)
        if (added !== undefined) yield* history.write({ coin, currency, source }, added).pipe(Effect.catchTag("HistoryError", storeFailed))
      }
      return [...byDay].sort((a, b) => a[0] - b[0]).map(([day, price]): DailyPoint => [day, price] as const)
    })

  const held = (series: S) =>
    Effect.gen(function*() {
      const need = neededDays(yield* Clock.currentTimeMillis, options.seriesDays)
      const found = yield* readHeld(series)
      const points = found === undefined ? [] : within(found.points, need)
      return points.length === 0 ? Option.none() : Option.some(points)
    })

  return { fetch, held }
}
