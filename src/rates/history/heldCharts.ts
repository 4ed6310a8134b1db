/**
 * A coin's year of daily points from the kept history (./DailyHistory.ts) first: only the days it
 * lacks are asked of CoinGecko (`/coins/{id}/market_chart/range`, one call per missing range), and
 * what comes back is kept. A restart or a second instance therefore refetches nothing held, and
 * serves the held days while CoinGecko is down.
 *
 * The days needed at `now` run from 364 days before today (the Demo plan answers nothing older than
 * 365 days) to the last published close (dailySeries.ts `lastPublishedDay`): 365 points, 364 in the
 * 35 minutes after midnight UTC. Coverage records the days asked (with or without a point), except
 * that a newest day answered without a point is not recorded: it may only be late, and is asked again.
 *
 * The store never fails a request the upstream can serve: a read that fails counts as nothing held,
 * a write that fails is skipped, and either is logged once until the store works again.
 */
import { Clock, Effect, Option } from "effect"
import type { ChartPoint, CoinGeckoClientShape, CoinGeckoError } from "../CoinGeckoClient.ts"
import { DAY_MS, type DailyPoint, lastPublishedDay } from "../dailySeries.ts"
import type { DailyHistoryShape, HeldSeries, HistoryError } from "./DailyHistory.ts"

/** Days at 00:00 UTC, both included. */
export interface DayRange {
  readonly from: number
  readonly to: number
}

const startOfDay = (epochMs: number) => Math.floor(epochMs / DAY_MS) * DAY_MS

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

/** Closes can be a few seconds off midnight; a point further off (the trailing "now") is no close. */
const CLOSE_TOLERANCE_MS = 10 * 60_000
/** The range asked is widened by this on both sides, so closes a little off midnight are not cut off. */
const RANGE_MARGIN_S = 3_600
/** The Demo plan refuses a `from` older than 365 days (error 10012): never ask closer than this to it. */
const OLDEST_FROM_MS = 365 * DAY_MS - 10 * 60_000

/** The UNIX seconds asked for `range` at `now`: widened by the margin, but never older than the plan allows. */
export const askedSeconds = (range: DayRange, now: number) => ({
  from: Math.max(range.from / 1000 - RANGE_MARGIN_S, Math.ceil((now - OLDEST_FROM_MS) / 1000)),
  to: range.to / 1000 + RANGE_MARGIN_S
})

/** The upstream's points → one per day of `range`, at 00:00 UTC (the later one wins), oldest first. */
export const closesIn = (points: ReadonlyArray<ChartPoint>, range: DayRange): Array<DailyPoint> => {
  const byDay = new Map<number, number>()
  for (const [time, price] of [...points].sort((a, b) => a[0] - b[0])) {
    if (price === null || !Number.isFinite(time)) continue
    const day = Math.round(time / DAY_MS) * DAY_MS
    if (Math.abs(time - day) <= CLOSE_TOLERANCE_MS && day >= range.from && day <= range.to) byDay.set(day, price)
  }
  return [...byDay].sort((a, b) => a[0] - b[0]).map(([day, price]) => [day, price] as const)
}

/** What a fetched range adds to the history; undefined when nothing is to be recorded. */
export const coveredBy = (range: DayRange, closes: ReadonlyArray<DailyPoint>, need: DayRange): HeldSeries | undefined => {
  const newest = closes.at(-1)?.[0]
  if (range.to < need.to || newest === range.to) return { coveredFrom: range.from, coveredTo: range.to, points: closes }
  return newest === undefined ? undefined : { coveredFrom: range.from, coveredTo: newest, points: closes }
}

export interface HeldCharts {
  /** The series at `now`: held days, and the missing ones fetched and kept; null for an unknown coin (404). */
  readonly fetch: (id: string, currency: string) => Effect.Effect<ReadonlyArray<DailyPoint> | null, CoinGeckoError>
  /** The held days of the series, when the upstream cannot serve the rest; none when nothing of the need is held. */
  readonly held: (id: string, currency: string) => Effect.Effect<Option.Option<ReadonlyArray<DailyPoint>>>
}

export const makeHeldCharts = (history: DailyHistoryShape, upstream: CoinGeckoClientShape, seriesDays: number): HeldCharts => {
  let failing = false
  const storeFailed = (error: HistoryError) =>
    Effect.suspend(() => {
      if (failing) return Effect.void
      failing = true
      return Effect.logWarning("rates history unavailable; fetching from the upstream without it", error.message)
    })
  const storeWorked = Effect.suspend(() => {
    if (!failing) return Effect.void
    failing = false
    return Effect.logInfo("rates history available again")
  })

  const readHeld = (id: string, currency: string) =>
    history.read(id, currency, "coingecko").pipe(
      Effect.tap(() => storeWorked),
      Effect.map(Option.getOrUndefined),
      Effect.catchTag("HistoryError", (error) => Effect.as(storeFailed(error), undefined))
    )

  const within = (points: ReadonlyArray<DailyPoint>, need: DayRange) => points.filter(([day]) => day >= need.from && day <= need.to)

  const fetch = (id: string, currency: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const need = neededDays(now, seriesDays)
      const held = yield* readHeld(id, currency)
      const missing = missingRanges(held, need)
      const byDay = new Map<number, number>(held === undefined ? [] : within(held.points, need))
      for (const range of missing) {
        const asked = askedSeconds(range, now)
        const points = yield* upstream.marketChartRange(id, currency, asked.from, asked.to)
        const closes = closesIn(points, range)
        for (const [day, price] of closes) if (!byDay.has(day)) byDay.set(day, price)
        const added = coveredBy(range, closes, need)
        if (added !== undefined) {
          yield* history.write(id, currency, "coingecko", added).pipe(Effect.catchTag("HistoryError", storeFailed))
        }
      }
      return [...byDay].sort((a, b) => a[0] - b[0]).map(([day, price]) => [day, price] as const)
    }).pipe(
      Effect.catchIf((error) => error._tag === "CoinGeckoError" && error.kind === "not-found", () => Effect.succeed(null))
    )

  const held = (id: string, currency: string) =>
    Effect.gen(function*() {
      const need = neededDays(yield* Clock.currentTimeMillis, seriesDays)
      const series = yield* readHeld(id, currency)
      const points = series === undefined ? [] : within(series.points, need)
      return points.length === 0 ? Option.none() : Option.some(points)
    })

  return { fetch, held }
}
