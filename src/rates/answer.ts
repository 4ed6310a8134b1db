/**
 * The last step of a `historical` call: the C4 body from what the other steps gathered (resolved coins,
 * their series and latest prices), and until when it holds. Pure: no I/O, no clock.
 *
 * A known coin that can be served neither fresh nor from a last good copy fails the whole answer: a
 * partial answer would look complete to the caller. A coin the second source served (fallback/) is
 * its rate, whole; each rate names its source, and the answer every source it used (CONTRACT C4).
 */
import { Result } from "effect"
import type { CoinGeckoError } from "./CoinGeckoClient.ts"
import { changesFromSeries } from "./dailySeries.ts"
import { RatesUnavailableError } from "./errors.ts"
import type { RateSource, SecondOutcome, WantedCoin } from "./fallback/SecondSource.ts"
import type { Chart, LatestPrices } from "./marketData.ts"
import type { RatesAnswer, RatesQuery, RateSeries } from "./RatesProvider.ts"
import type { Sourced } from "./staleCache.ts"
import type { Resolved } from "./symbolResolution.ts"

export const SOURCE = "coingecko"
export const ATTRIBUTION = "Data provided by CoinGecko"

/** The answer's `source`: the one every rate names, or `mixed`; CoinGecko's when there is no rate. */
export const answerSource = (sources: ReadonlySet<RateSource>): RateSource | "mixed" =>
  sources.size > 1 ? "mixed" : sources.has("coinbase") ? "coinbase" : SOURCE

/**
 * A coin neither source could serve, with no copy held: 503 (CONTRACT C4 "Second source"), to be asked
 * again after the shorter of the two sources' waits (a source that does not list the coin has none).
 */
export const neitherSource = (first: CoinGeckoError, second: SecondOutcome & { readonly _tag: "Failed" }): RatesUnavailableError => {
  const waits = [Math.max(1, first.retryAfterSeconds)]
  if (second.error.kind !== "not-found") waits.push(Math.max(1, second.error.retryAfterSeconds))
  return new RatesUnavailableError({ reason: `${first.message}; ${second.error.message}`, retryAfterSeconds: Math.min(...waits) })
}

/** `2026-11-22T10:00:00Z`: ISO 8601 without the milliseconds (toISOString always ends `.mmmZ` in this range). */
export const isoSeconds = (epochMs: number) => {
  const iso = new Date(epochMs).toISOString()
  return iso.length === 24 ? `${iso.slice(0, 19)}Z` : iso.replace(/\.\d{3}Z$/, "Z")
}

/**
 * `points.slice(-count)`, by hand: on a frozen array (cached entries are frozen) `slice` takes V8's slow
 * path, about 40 times slower than this loop.
 */
export const lastPoints = <A>(points: ReadonlyArray<A>, count: number): Array<A> => {
  const start = count > 0 ? Math.max(0, points.length - count) : Math.min(points.length, -count)
  const out: Array<A> = []
  for (let i = start; i < points.length; i++) out.push(points[i]!)
  return out
}

/** Distinct coin ids of the resolved symbols, first occurrence first. */
export const coinIds = (resolved: Resolved): Array<string> => {
  // At most 50 symbols: a linear scan beats a Set here.
  const ids: Array<string> = []
  for (const coin of resolved.coins.values()) if (coin !== null && !ids.includes(coin.id)) ids.push(coin.id)
  return ids
}

export interface Gathered {
  readonly query: RatesQuery
  /** When the call started (epoch ms): `asOf` of an answer without any price. */
  readonly startedAt: number
  readonly resolved: Resolved
  readonly latest: LatestPrices
  /** The series of every coin id of `resolved`, or why it could not be had. */
  readonly charts: ReadonlyMap<string, Result.Result<Sourced<Chart>, CoinGeckoError>>
  /** What the second source answered for the coins CoinGecko could not serve fresh (none when not asked). */
  readonly second?: ReadonlyMap<string, SecondOutcome> | undefined
  /** The second source's attribution, for when one of its rates is in the answer. */
  readonly secondAttribution?: string | undefined
}

/**
 * The coins CoinGecko could not serve fresh: its chart failed (a 404 is an answer: "no such coin"), or
 * only a stale copy of its chart or latest price is held, or no latest price because the call failed.
 */
export const notServedFresh = (
  resolved: Resolved,
  latest: LatestPrices,
  charts: Gathered["charts"]
): Array<WantedCoin> => {
  const wanted: Array<WantedCoin> = []
  for (const [symbol, coin] of resolved.coins) {
    if (coin === null || wanted.some((w) => w.id === coin.id)) continue
    const chart = charts.get(coin.id)
    if (chart === undefined) continue
    let failed: boolean
    if (Result.isFailure(chart)) failed = chart.failure.kind !== "not-found"
    else if (chart.success.value === null) failed = false
    else {
      const market = latest.latest.get(coin.id)
      failed = chart.success.stale || (market === undefined ? latest.failure !== undefined : market.stale)
    }
    if (failed) wanted.push({ symbol, id: coin.id })
  }
  return wanted
}

export const assembleAnswer = (gathered: Gathered): Result.Result<RatesAnswer, CoinGeckoError | RatesUnavailableError> => {
  const { charts, latest, query, resolved } = gathered
  const sources = new Set<RateSource>()
  // Until when this very answer may be repeated: the earliest `holdsUntil` of what it is made of (an
  // old copy, or a call that failed and that the next request would retry, makes it 0).
  let freshUntil = Number.POSITIVE_INFINITY
  let stale = false
  let asOf = Number.POSITIVE_INFINITY
  const rates: Array<RateSeries> = []
  const unknown: Array<string> = []

  for (const symbol of query.symbols) {
    const coin = resolved.coins.get(symbol) ?? null
    const chart = coin === null ? undefined : charts.get(coin.id)
    if (coin === null || chart === undefined) {
      unknown.push(symbol)
      continue
    }
    const second = gathered.second?.get(coin.id)
    if (second?._tag === "Served") {
      const { rate } = second
      freshUntil = Math.min(freshUntil, rate.holdsUntil)
      asOf = Math.min(asOf, rate.asOf)
      sources.add("coinbase")
      rates.push({ symbol, id: coin.id, name: rate.name, price: rate.price, change: rate.change, series: lastPoints(rate.series, query.days), source: "coinbase" })
      continue
    }
    // Strict: every known coin is served (fresh or last good), or the request fails.
    if (Result.isFailure(chart)) return Result.fail(second === undefined ? chart.failure : neitherSource(chart.failure, second))
    const series = chart.success
    const market = latest.latest.get(coin.id)
    freshUntil = Math.min(freshUntil, series.holdsUntil, market === undefined ? 0 : market.holdsUntil)
    if (series.value === null) {
      unknown.push(symbol) // resolved, but the upstream has no such coin (404)
      continue
    }
    const lastClose = series.value.at(-1) // the last of the whole series is the last of its tail
    let price: number
    let change: RateSeries["change"]
    let name = coin.name
    if (market !== undefined && market.value !== null && market.value.price !== null) {
      price = market.value.price
      change = { "24h": market.value.change24h, "7d": market.value.change7d, "30d": market.value.change30d }
      name = market.value.name || name
      asOf = Math.min(asOf, market.storedAt)
      stale ||= market.stale
    } else if (lastClose !== undefined) {
      // No latest price (upstream lists no market, or it failed and we hold no copy): the last close.
      price = lastClose[1]
      change = changesFromSeries(series.value) // the whole fetched range: 30d needs more than days=7
      asOf = Math.min(asOf, lastClose[0])
      stale ||= latest.failure !== undefined
    } else {
      unknown.push(symbol) // a coin without any price data
      continue
    }
    stale ||= series.stale
    // The points themselves are frozen (cached entries are), so the answer shares them.
    sources.add(SOURCE)
    rates.push({ symbol, id: coin.id, name, price, change, series: lastPoints(series.value, query.days), source: SOURCE })
  }

  // Without any rate, asOf is the clock's: the next answer differs, nothing in it is worth reusing.
  const priced = Number.isFinite(asOf)
  return Result.succeed({
    result: {
      currency: query.currency.toUpperCase(),
      days: query.days,
      interval: "daily",
      asOf: isoSeconds(priced ? asOf : gathered.startedAt),
      source: answerSource(sources),
      stale,
      rates,
      unknown,
      attribution: sources.has("coinbase")
        ? (sources.has(SOURCE) ? `${ATTRIBUTION}; ${gathered.secondAttribution}` : gathered.secondAttribution ?? ATTRIBUTION)
        : ATTRIBUTION
    },
    freshUntil: priced ? freshUntil : 0
  })
}
