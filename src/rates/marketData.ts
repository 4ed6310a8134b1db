/**
 * Step 3 of a `historical` call, per coin: its latest price and % changes (one batched `/coins/markets`
 * call for all cold ones; refreshed, one call per currency for every coin asked in it, as often as the
 * month's pace allows: refreshPacer.ts) and
 * its daily series (always the whole year, so that any `days` is served from one entry: the shape of a
 * request never multiplies calls; cached until the next daily point, behind it the kept history of
 * history/heldCharts.ts, which asks the upstream only for the days it lacks). Both with the lifecycle
 * of staleCache.ts: refreshed behind the callers' backs, last good copies when the upstream fails,
 * and for a series, the held days when no copy is cached.
 */
import { Clock, Duration, Effect, Option, Schema } from "effect"
import type { CoinGeckoClientShape, CoinGeckoError, MarketRow } from "./CoinGeckoClient.ts"
import { millisUntilNextDailyPoint } from "./dailySeries.ts"
import type { HeldCharts } from "./history/heldCharts.ts"
import { type RefreshPacer, UNIT_SIZE } from "./refreshPacer.ts"
import { deepFreeze, type Entry, entryOf, freshnessOf, lastGood, served, type Sourced, type StaleCache, type Timing } from "./staleCache.ts"

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

export const latestKey = (currency: string, id: string) => `rates:v2:latest:${currency}:${id}`
export const chartKey = (id: string, currency: string) => `rates:v2:chart:${id}:${currency}`

/** Every series is fetched for the longest `days` allowed (C4) and sliced. */
export const SERIES_DAYS = 365

export const toLatest = (row: MarketRow): NonNullable<Latest> => ({
  name: row.name,
  price: row.current_price,
  change24h: row.price_change_percentage_24h_in_currency ?? row.price_change_percentage_24h ?? null,
  change7d: row.price_change_percentage_7d_in_currency ?? null,
  change30d: row.price_change_percentage_30d_in_currency ?? null
})

/** A negative answer: fresh for its time, never served past it. */
const negative = (ttl: Duration.Duration): Timing => ({ ttl, refreshAhead: Duration.zero, grace: Duration.zero })

/** A coin missing upstream may be listed later; ask again after an hour rather than on every request. */
const MISSING_COIN_TTL = Duration.hours(1)
const MAX_SERIES_GRACE = Duration.hours(1)

/** Past points never change: a series is complete until the next daily point, then served while refreshed. */
const chartTiming = (value: Chart, storedAt: number): Timing => {
  if (value === null) return negative(MISSING_COIN_TTL)
  const ttl = Duration.millis(millisUntilNextDailyPoint(storedAt))
  return { ttl, refreshAhead: Duration.zero, grace: Duration.min(ttl, MAX_SERIES_GRACE) }
}

export interface LatestPrices {
  /** Per coin id; a missing id means "unavailable" (the upstream failed and no copy is held). */
  readonly latest: ReadonlyMap<string, Sourced<Latest>>
  /** The upstream failure behind missing or old entries, if the batched call failed. */
  readonly failure: CoinGeckoError | undefined
}

export interface MarketData {
  /** Latest prices for coins, one batched upstream call for the cold ones. Never fails: see `failure`. */
  readonly latestFor: (ids: ReadonlyArray<string>, currency: string, deadline: number) => Effect.Effect<LatestPrices>
  /** The year of daily closes of a coin: the caller keeps the last `days` of them. */
  readonly chartFor: (id: string, currency: string, deadline: number) => Effect.Effect<Sourced<Chart>, CoinGeckoError>
}

export const makeMarketData = (
  cache: StaleCache,
  upstream: CoinGeckoClientShape,
  charts: HeldCharts,
  options: {
    readonly latestTtl: Duration.Duration
    readonly attemptTimeout: Duration.Duration
    readonly pacer: RefreshPacer
  }
): MarketData => {
  const { pacer } = options
  // Fresh for the pacer's interval when stored, refreshed when asked for an attempt's time before it
  // ends (so the new copy lands before the old one expires), served one interval more while the refresh
  // runs or the pace holds it back (at most the wait for one credit); past that, a request waits for a
  // cold fetch, and during an outage gets the copy marked stale.
  const latestTiming = (intervalMs: number): Timing => {
    const ttl = Duration.millis(intervalMs)
    return { ttl, refreshAhead: Duration.min(Duration.divideUnsafe(ttl, 2), options.attemptTimeout), grace: ttl }
  }

  /** One `/coins/markets` call for `ids`, stored. */
  const fetchLatest = (ids: ReadonlyArray<string>, currency: string) =>
    Effect.gen(function*() {
      const rows = yield* upstream.marketsByIds(currency, ids)
      const storedAt = yield* Clock.currentTimeMillis
      const timing = latestTiming(pacer.interval(storedAt))
      const byId = new Map(rows.map((row) => [row.id, row] as const))
      const out = new Map<string, Sourced<Latest>>()
      for (const id of ids) {
        const row = byId.get(id)
        const value = row === undefined ? null : Object.freeze(toLatest(row))
        const entry = yield* cache.write(latestKey(currency, id), value, storedAt, value === null ? negative(options.latestTtl) : timing)
        out.set(id, served(entry as Entry<Latest>, freshnessOf(entry, storedAt)))
      }
      return out
    })

  /**
   * The background refresh of a currency's unit: every coin asked in it, one call. Skipped when every
   * one of them is fresh again (another instance refreshed them through the shared cache).
   */
  const refreshUnit = (currency: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const ids = pacer.unit(currency, now)
      let due = false
      for (const id of ids) {
        const held = yield* cache.read(latestEntry, latestKey(currency, id))
        if (Option.isNone(held) || freshnessOf(held.value, now) !== "fresh") due = true
      }
      if (due) yield* fetchLatest([...ids].sort(), currency)
    })

  const latestFor = (ids: ReadonlyArray<string>, currency: string, deadline: number) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      pacer.note(currency, ids, now)
      const latest = new Map<string, Sourced<Latest>>()
      const cold: Array<string> = []
      let due = false
      const copies = new Map<string, Entry<Latest>>()
      for (const id of ids) {
        const hit = yield* cache.read(latestEntry, latestKey(currency, id))
        if (Option.isNone(hit)) {
          cold.push(id)
          continue
        }
        const freshness = freshnessOf(hit.value, now)
        if (freshness === "expired") {
          cold.push(id)
          copies.set(id, hit.value)
          continue
        }
        latest.set(id, served(hit.value, freshness))
        if (freshness !== "fresh") due = true
      }
      if (due) yield* cache.refresh([currency], (unit) => `latest-unit:${unit}`, () => refreshUnit(currency))
      if (cold.length === 0) return { latest, failure: undefined }

      // The call costs one credit whatever its size: it takes the currency's unit along, so that the
      // unit's prices stay in step and are refreshed together.
      const batch = [...new Set([...cold, ...pacer.unit(currency, now)])].slice(0, Math.max(cold.length, UNIT_SIZE)).sort()
      const fetched = yield* cache.shared(`latest:${currency}:${batch.join(",")}`, fetchLatest(batch, currency), deadline).pipe(Effect.result)
      if (fetched._tag === "Success") {
        for (const [id, value] of fetched.success) latest.set(id, value)
        return { latest, failure: undefined }
      }
      for (const [id, copy] of copies) if (copy.value !== null) latest.set(id, lastGood(copy))
      return { latest, failure: fetched.failure }
    })

  const chartFor = (id: string, currency: string, deadline: number) =>
    cache.cachedOrFetch({
      key: chartKey(id, currency),
      entry: chartEntry,
      fetch: Effect.suspend(() => charts.fetch(id, currency)),
      timing: chartTiming,
      deadline
    }).pipe(
      // No copy in the cache, and the upstream cannot give the missing days: the days held, marked stale.
      Effect.catchIf((error) => error.kind !== "not-found", (error) =>
        Effect.flatMap(charts.held(id, currency), (held) =>
          Option.isNone(held)
            ? Effect.fail(error)
            : Effect.map(Clock.currentTimeMillis, (now): Sourced<Chart> => ({ value: deepFreeze(held.value), storedAt: now, stale: true, holdsUntil: 0 }))))
    )

  return { latestFor, chartFor }
}
