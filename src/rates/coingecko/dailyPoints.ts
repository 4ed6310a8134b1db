/**
 * `DailyPoints` served by CoinGecko: a coin's whole year of daily points (any `days` is one copy), held (copies/)
 * until the next daily point; behind it the kept history (history/), which asks `/coins/{id}/market_chart/range`
 * only for the days it lacks, and serves them, stale, when CoinGecko cannot and no copy is held.
 */
import { Clock, Effect, Layer, Option, Result, Schema } from "effect"
import { makeCopies } from "../copies/Copies.ts"
import type { CopyStore } from "../copies/CopyStore.ts"
import { deepFreeze } from "../../platform/deepFreeze.ts"
import { DAY_MS, type DailyPoint, type DayRange, seriesTiming } from "../dailySeries.ts"
import { DailyHistory, makeKeptSeries } from "../history/DailyHistory.ts"
import { type Chart, DailyPoints, type Served } from "../ports.ts"
import type { SourceError } from "../upstream.ts"
import { type ChartPoint, CoinGeckoClient } from "./CoinGeckoClient.ts"
import { CoinGeckoConfig } from "./CoinGeckoConfig.ts"
import { ATTRIBUTION } from "./latestPrices.ts"

/** Every series is fetched for the longest `days` allowed (C4) and sliced. */
const SERIES_DAYS = 365
const ChartSchema = Schema.NullOr(Schema.Array(Schema.Tuple([Schema.Finite, Schema.Finite])))
// A series' copy is held under its store key, which names its coin and currency (neither holds a colon).
const CHART = "rates:v2:chart:"
const chartKey = (id: string, currency: string) => `${CHART}${id}:${currency}`
const seriesOf = (key: string): SeriesOf => {
  const [coin = "", currency = ""] = key.slice(CHART.length).split(":")
  return { coin, currency }
}

interface SeriesOf {
  readonly coin: string
  readonly currency: string
}

/** Closes can be a few seconds off midnight; a point further off (the trailing "now") is no close. */
const CLOSE_TOLERANCE_MS = 10 * 60_000
/** The range asked is widened by this on both sides, so closes a little off midnight are not cut off. */
const RANGE_MARGIN_S = 3_600
/** The Demo plan refuses a `from` older than 365 days (error 10012): never ask closer than this to it. */
const OLDEST_FROM_MS = 365 * DAY_MS - 10 * 60_000

/** The UNIX seconds asked for `range` at `now`: widened by the margin, but never older than the plan allows. */
const askedSeconds = (range: DayRange, now: number) => ({
  from: Math.max(range.from / 1000 - RANGE_MARGIN_S, Math.ceil((now - OLDEST_FROM_MS) / 1000)),
  to: range.to / 1000 + RANGE_MARGIN_S
})

/** CoinGecko's points → one per day of `range`, at 00:00 UTC (the later one wins), oldest first. */
export const closesIn = (points: ReadonlyArray<ChartPoint>, range: DayRange): Array<DailyPoint> => {
  const byDay = new Map<number, number>()
  for (const [time, price] of [...points].sort((a, b) => a[0] - b[0])) {
    if (price === null || !Number.isFinite(time)) continue
    const day = Math.round(time / DAY_MS) * DAY_MS
    if (Math.abs(time - day) <= CLOSE_TOLERANCE_MS && day >= range.from && day <= range.to) byDay.set(day, price)
  }
  return [...byDay].sort((a, b) => a[0] - b[0]).map(([day, price]) => [day, price] as const)
}

const makeDailyPoints = Effect.gen(function*() {
  const config = yield* CoinGeckoConfig
  const client = yield* CoinGeckoClient
  const kept = makeKeptSeries(yield* DailyHistory, "coingecko", {
    seriesDays: SERIES_DAYS,
    closes: ({ coin, currency }: SeriesOf, range, now) => {
      const asked = askedSeconds(range, now)
      return Effect.map(client.marketChartRange(coin, currency, asked.from, asked.to), (points) => closesIn(points, range))
    }
  })

  /** The series, held days first; null for a coin CoinGecko does not know (404). */
  const fetch = (keys: ReadonlyArray<string>) =>
    Effect.forEach(keys, (key) =>
      kept.fetch(seriesOf(key)).pipe(
        Effect.catchReason("SourceError", "NotFound", () => Effect.succeed(null)),
        Effect.map((chart): readonly [string, Chart] => [key, chart])
      ))

  const copies = yield* makeCopies<Chart>({
    name: "daily points",
    source: "coingecko",
    value: ChartSchema,
    timing: seriesTiming,
    fetch,
    onFailure: { lastGoodMs: config.staleTtlHours * 3_600_000, retryMs: config.auxiliaryRetryMs }
  })

  /** No copy, and CoinGecko cannot give the missing days: the days held, marked stale. */
  const heldInstead = (key: SeriesOf, error: SourceError) =>
    error.reason._tag === "NotFound"
      ? Effect.succeed(Result.fail(error))
      : Effect.map(Effect.all([kept.held(key), Clock.currentTimeMillis]), ([held, now]) =>
        Option.match(held, {
          onNone: () => Result.fail(error),
          onSome: (points) => Result.succeed<Served<Chart>>({ value: deepFreeze(points), storedAt: now, stale: true, holdsUntil: 0 })
        }))

  return DailyPoints.of({
    source: "coingecko",
    attribution: ATTRIBUTION,
    series: (ids, currency) =>
      Effect.gen(function*() {
        const keys = ids.map((coin) => chartKey(coin, currency))
        const { failures, served } = yield* copies.getAll(keys)
        const out = new Map<string, Result.Result<Served<Chart>, SourceError>>()
        for (const [i, coin] of ids.entries()) {
          const found = served.get(keys[i]!)
          out.set(coin, found !== undefined ? Result.succeed(found) : yield* heldInstead({ coin, currency }, failures.get(keys[i]!)!))
        }
        return out
      })
  })
})

export const layer: Layer.Layer<DailyPoints, never, CoinGeckoClient | CoinGeckoConfig | DailyHistory | CopyStore> = Layer.effect(DailyPoints, makeDailyPoints)
