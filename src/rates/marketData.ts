/**
 * Step 3 of a `historical` call, per coin: its latest price and % changes (one batched `/coins/markets`
 * call for all misses, cached `latestTtlSeconds`) and its daily series (fetched for a fixed range and
 * sliced, cached until the next daily point). Both with last good copies (staleCache.ts).
 */
import { Clock, Duration, Effect, Option, Schema } from "effect"
import type { CoinGeckoClientShape, CoinGeckoError, MarketRow } from "./CoinGeckoClient.ts"
import { type DailyPoint, millisUntilNextDailyPoint, toDailySeries } from "./dailySeries.ts"
import { entryOf, lastGoodKey, type Sourced, type StaleCache } from "./staleCache.ts"

/** Latest price and % changes of one coin in one currency; null when the upstream lists no market for it. */
const Latest = Schema.NullOr(Schema.Struct({
  name: Schema.String,
  price: Schema.NullOr(Schema.Finite),
  change24h: Schema.NullOr(Schema.Finite),
  change7d: Schema.NullOr(Schema.Finite),
  change30d: Schema.NullOr(Schema.Finite)
}))
export type Latest = typeof Latest.Type

/** Daily points; null when the coin id does not exist upstream (404). */
const Chart = Schema.NullOr(Schema.Array(Schema.Tuple([Schema.Finite, Schema.Finite])))
export type Chart = typeof Chart.Type

const latestEntry = entryOf(Latest)
const chartEntry = entryOf(Chart)

export const latestKey = (currency: string, id: string) => `rates:cg:latest:${currency}:${id}`
const chartKey = (id: string, currency: string, days: number) => `rates:cg:chart:${id}:${currency}:${days}`

export const toLatest = (row: MarketRow): NonNullable<Latest> => ({
  name: row.name,
  price: row.current_price,
  change24h: row.price_change_percentage_24h_in_currency ?? row.price_change_percentage_24h ?? null,
  change7d: row.price_change_percentage_7d_in_currency ?? null,
  change30d: row.price_change_percentage_30d_in_currency ?? null
})

/**
 * Series are fetched for a few fixed ranges and sliced: 29 and 30 days share one upstream call and one
 * cache entry, and callers cannot multiply cache keys (or upstream calls) by varying `days`.
 */
const SERIES_RANGES = [7, 30, 90, 180, 365] as const
export const seriesRangeFor = (days: number): number => SERIES_RANGES.find((range) => range >= days) ?? days

/** A coin missing upstream may be listed later; ask again after an hour rather than on every request. */
const MISSING_COIN_TTL = Duration.hours(1)

/** How long a chart entry stays fresh: past points never change, so until the next daily point. */
const chartTtl = (value: Chart, storedAt: number): Duration.Duration =>
  value === null ? MISSING_COIN_TTL : Duration.millis(millisUntilNextDailyPoint(storedAt))

/** Until when (epoch ms) a chart entry stored at `storedAt` is fresh. */
export const chartFreshUntil = (chart: Sourced<Chart>): number => chart.storedAt + Duration.toMillis(chartTtl(chart.value, chart.storedAt))

export interface LatestPrices {
  /** Per coin id; a missing id means "unavailable" (the upstream failed and no copy is held). */
  readonly latest: ReadonlyMap<string, Sourced<Latest>>
  /** The upstream failure behind missing or old entries, if the batched call failed. */
  readonly failure: CoinGeckoError | undefined
}

export interface MarketData {
  /** Latest prices for coins, one batched upstream call for the misses. Never fails: see `failure`. */
  readonly latestFor: (ids: ReadonlyArray<string>, currency: string, deadline: number) => Effect.Effect<LatestPrices>
  /** Daily closes for the range bucket of `days`: the caller keeps the last `days` of them. */
  readonly chartFor: (id: string, currency: string, days: number, deadline: number) => Effect.Effect<Sourced<Chart>, CoinGeckoError>
}

export const makeMarketData = (
  cache: StaleCache,
  upstream: CoinGeckoClientShape,
  options: { readonly latestTtl: Duration.Duration }
): MarketData => {
  const latestFor = (ids: ReadonlyArray<string>, currency: string, deadline: number) =>
    Effect.gen(function*() {
      const latest = new Map<string, Sourced<Latest>>()
      const misses: Array<string> = []
      for (const id of ids) {
        const hit = yield* cache.read(latestEntry, latestKey(currency, id))
        if (Option.isSome(hit)) latest.set(id, { ...hit.value, stale: false })
        else misses.push(id)
      }
      if (misses.length === 0) return { latest, failure: undefined }

      const batch = [...misses].sort()
      const fetched = yield* cache.shared(
        `latest:${currency}:${batch.join(",")}`,
        Effect.gen(function*() {
          const rows = yield* upstream.marketsByIds(currency, batch)
          const storedAt = yield* Clock.currentTimeMillis
          const byId = new Map(rows.map((row) => [row.id, row] as const))
          const out = new Map<string, Sourced<Latest>>()
          for (const id of batch) {
            const row = byId.get(id)
            const value = row === undefined ? null : Object.freeze(toLatest(row))
            yield* cache.write(latestKey(currency, id), value, storedAt, options.latestTtl, value !== null)
            out.set(id, { value, storedAt, stale: false })
          }
          return out
        }),
        deadline
      ).pipe(Effect.result)

      if (fetched._tag === "Success") {
        for (const [id, value] of fetched.success) latest.set(id, value)
        return { latest, failure: undefined }
      }
      for (const id of misses) {
        const copy = yield* cache.read(latestEntry, lastGoodKey(latestKey(currency, id)))
        if (Option.isSome(copy)) latest.set(id, { ...copy.value, stale: true })
      }
      return { latest, failure: fetched.failure }
    })

  const chartFor = (id: string, currency: string, days: number, deadline: number) => {
    const range = seriesRangeFor(days)
    return cache.cachedOrFetch({
      key: chartKey(id, currency, range),
      entry: chartEntry,
      fetch: Effect.suspend(() =>
        upstream.marketChart(id, currency, range).pipe(
          Effect.map((points): ReadonlyArray<DailyPoint> | null => toDailySeries(points, range)),
          Effect.catchIf((error) => error.kind === "not-found", () => Effect.succeed(null))
        )
      ),
      ttl: chartTtl,
      deadline
    })
  }

  return { latestFor, chartFor }
}
