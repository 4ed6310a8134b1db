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
import { Clock, Effect, Option, Result } from "effect"
import { coveredBy, type DailyPoint, type DayRange, missingRanges, neededDays, pointsWithin } from "../dailySeries.ts"
import type { Charge, SourceError, SourceName } from "../upstream.ts"
import type { DailyHistoryShape, HistoryError } from "./DailyHistory.ts"

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
  // Generators, not callbacks: a read or a write crosses into DailyHistory.ts once and resumes here.
  let failing = false
  function* storeFailed(error: HistoryError) {
    if (failing) return
    failing = true
    yield* Effect.logWarning(`rates history unavailable; fetching from ${source} without it`, error.message)
  }

  function* readHeld({ coin, currency }: SeriesOf) {
    const read = yield* Effect.result(history.read({ coin, currency, source }))
    if (Result.isFailure(read)) {
      yield* storeFailed(read.failure)
      return undefined
    }
    if (failing) {
      failing = false
      yield* Effect.logInfo("rates history available again")
    }
    return Option.getOrUndefined(read.success)
  }

  const fetch = (series: S, charge: Charge) =>
    Effect.gen(function*() {
      const { coin, currency } = series
      const now = yield* Clock.currentTimeMillis
      const held = yield* readHeld(series)
      const need = neededDays(now, options.seriesDays)
      const byDay = new Map<number, number>(held === undefined ? [] : pointsWithin(held.points, need))
      for (const range of missingRanges(held, need)) {
        const closes = yield* options.closes(series, range, now, charge)
        for (const [day, price] of closes) if (!byDay.has(day)) byDay.set(day, price)
        const added = coveredBy(range, closes, need)
        if (added === undefined) continue
        const wrote = yield* Effect.result(history.write({ coin, currency, source }, added))
        if (Result.isFailure(wrote)) yield* storeFailed(wrote.failure)
      }
      return [...byDay].sort((a, b) => a[0] - b[0]).map(([day, price]): DailyPoint => [day, price] as const)
    })

  const held = (series: S) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const found = yield* readHeld(series)
      const points = found === undefined ? [] : pointsWithin(found.points, neededDays(now, options.seriesDays))
      return points.length === 0 ? Option.none() : Option.some(points)
    })

  return { fetch, held }
}
