/**
 * `LatestPrices` served by CoinGecko: a coin's latest price and % changes from `/coins/markets`, one call
 * for every cold coin of a request (and the rest of its currency's unit, for the same one credit:
 * refreshPacer.ts), held as copies (copies/) that live for their currency's refresh interval, the share
 * of the month's pace its callers have (RatesDemand, ../demand.ts), and refreshed behind the callers'
 * backs, one call per currency for every coin asked in it. During an outage the last good copies serve,
 * marked stale.
 */
import { Clock, Duration, Effect, Layer, Schema } from "effect"
import { makeCopies } from "../copies/Copies.ts"
import type { CopyStore } from "../copies/CopyStore.ts"
import { freshFor, type Timing } from "../copies/entry.ts"
import { type Latest, LatestPrices, type Served } from "../ports.ts"
import type { Charge } from "../upstream.ts"
import { RatesDemand } from "../demand.ts"
import { CoinGeckoClient, type MarketRow } from "./CoinGeckoClient.ts"
import { CoinGeckoConfig } from "./CoinGeckoConfig.ts"
import { MonthlyBudget } from "./credits/MonthlyBudget.ts"
import { makeRefreshPacer, UNIT_SIZE } from "./refreshPacer.ts"

export const ATTRIBUTION = "Data provided by CoinGecko"

/** As held (and shared through Redis): the port's `Latest`. */
const LatestSchema = Schema.NullOr(Schema.Struct({
  name: Schema.String,
  price: Schema.NullOr(Schema.Finite),
  change24h: Schema.NullOr(Schema.Finite),
  change7d: Schema.NullOr(Schema.Finite),
  change30d: Schema.NullOr(Schema.Finite)
}))

const latestKey = (currency: string, id: string) => `rates:v2:latest:${currency}:${id}`

interface PriceOf {
  readonly currency: string
  readonly id: string
}

const toLatest = (row: MarketRow): NonNullable<Latest> => ({
  name: row.name,
  price: row.current_price,
  change24h: row.price_change_percentage_24h_in_currency ?? row.price_change_percentage_24h ?? null,
  change7d: row.price_change_percentage_7d_in_currency ?? null,
  change30d: row.price_change_percentage_30d_in_currency ?? null
})

const makeLatestPrices = Effect.gen(function*() {
  const config = yield* CoinGeckoConfig
  const client = yield* CoinGeckoClient
  const { plan } = yield* MonthlyBudget
  const demand = yield* RatesDemand
  const pacer = makeRefreshPacer({ minIntervalMs: config.latestTtlSeconds * 1000, creditsPerMs: plan.ratePerMs, demand: demand.weights })
  const attemptTimeout = Duration.millis(config.attemptTimeoutMs)

  // Fresh for its unit's interval when stored, refreshed when asked for an attempt's time before it
  // ends (so the new copy lands before the old one expires), served one interval more while the refresh
  // runs or the pace holds it back (at most the wait for one credit); past that, a request waits for a
  // cold fetch, and during an outage gets the copy marked stale.
  const timing = (value: Latest, storedAt: number, { currency }: PriceOf): Timing => {
    if (value === null) return freshFor(Duration.seconds(config.latestTtlSeconds))
    const ttl = Duration.millis(pacer.interval(currency, storedAt))
    return { ttl, refreshAhead: Duration.min(Duration.divideUnsafe(ttl, 2), attemptTimeout), grace: ttl }
  }

  /** One call for `keys` (all of one currency), taking its unit along, so the unit's prices stay in step. */
  const fetch = (keys: ReadonlyArray<PriceOf>, charge: Charge) =>
    Effect.gen(function*() {
      const currency = keys[0]!.currency
      const now = yield* Clock.currentTimeMillis
      const asked = keys.map((key) => key.id)
      const batch = [...new Set([...asked, ...pacer.unit(currency, now)])].slice(0, Math.max(asked.length, UNIT_SIZE)).sort()
      const rows = yield* client.marketsByIds(currency, batch, charge)
      const byId = new Map(rows.map((row) => [row.id, row] as const))
      return batch.map((id): readonly [PriceOf, Latest] => {
        const row = byId.get(id)
        return [{ currency, id }, row === undefined ? null : toLatest(row)]
      })
    })

  const copies = yield* makeCopies<PriceOf, Latest>({
    name: "latest prices",
    source: "coingecko",
    keyOf: ({ currency, id }) => latestKey(currency, id),
    value: LatestSchema,
    timing,
    isNegative: (value) => value === null,
    fetch,
    batched: true,
    lastGoodMs: config.staleTtlHours * 3_600_000,
    retryMs: config.auxiliaryRetryMs,
    // A currency's coins are refreshed together, one call.
    refreshGroup: {
      of: ({ currency }) => `latest-unit:${currency}`,
      keys: ({ currency }, now) => pacer.unit(currency, now).map((id) => ({ currency, id }))
    }
  })

  return LatestPrices.of({
    source: "coingecko",
    attribution: ATTRIBUTION,
    latest: (ids, currency, { charge, deadline }) =>
      Effect.gen(function*() {
        pacer.note(currency, ids, yield* Clock.currentTimeMillis)
        const keys = ids.map((id) => ({ currency, id }))
        const { failure, served } = yield* copies.getAll(keys, charge, deadline)
        const latest = new Map<string, Served<Latest>>()
        for (const key of keys) {
          const found = served.get(key)
          if (found !== undefined) latest.set(key.id, found)
        }
        return { latest, failure }
      })
  })
})

/**
 * Needs the client, the config, the month's budget and the callers' demand (together they set the refresh
 * intervals; the demand is the one the use case and the edge note: one instance per build) and the copies' store.
 */
export const layer: Layer.Layer<LatestPrices, never, CoinGeckoClient | CoinGeckoConfig | MonthlyBudget | RatesDemand | CopyStore> = Layer.effect(
  LatestPrices,
  makeLatestPrices
)
