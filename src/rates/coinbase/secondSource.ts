/**
 * The second source from Coinbase (CONTRACT C4, "Second source"), for curated coins (symbols.ts) it trades in the
 * currency asked: price and 24 h change from `stats`; the series from the kept history (history/) and daily candles
 * (candles.ts). No stale use: an answer is at most a minute old, so that the first source serves again soon.
 */
import { Clock, Duration, Effect, Layer, Schema } from "effect"
import { makeCopies } from "../copies/Copies.ts"
import { CopyStore } from "../copies/CopyStore.ts"
import { freshFor, type Timing } from "../copies/entry.ts"
import { changesFromSeries, DAY_MS, type DailyPoint, millisUntilNextDailyPoint } from "../dailySeries.ts"
import { DailyHistory, makeKeptSeries } from "../history/DailyHistory.ts"
import { type SecondOutcome, type SecondRate, SecondSource, type WantedCoin } from "../ports.ts"
import { curatedCoinFor } from "../symbols.ts"
import { type SourceError, sourceError, Spend } from "../upstream.ts"
import { asMidnightPoints, change24h } from "./candles.ts"
import { COINBASE_ATTRIBUTION, CoinbaseClient, type Stats } from "./CoinbaseClient.ts"
import { CoinbaseConfig } from "./CoinbaseConfig.ts"
import { CoinbaseProducts } from "./products.ts"

/** How long a Coinbase price, and an answer made of it, is reused: a minute. */
const STATS_REUSE_MS = 60_000
/** Every series is kept for a year, as the first source's (C4 `days` up to 365). */
const SERIES_DAYS = 365
const StatsSchema = Schema.Struct({ open: Schema.Finite, last: Schema.Finite })
const SeriesSchema = Schema.Array(Schema.Tuple([Schema.Finite, Schema.Finite]))
interface SeriesOf {
  readonly coin: string
  readonly currency: string
  readonly productId: string
}
/** Store keys: these, then a product id; a series' is its coin and currency (`seriesKey`). */
const STATS = "rates:v2:coinbase-stats:"
const seriesKey = ({ coin, currency }: SeriesOf) => `rates:v2:coinbase-chart:${coin}:${currency}`
const notServed = (detail: string) => sourceError("coinbase", "NotFound", detail)
/** Past points never change: a series holds until the next daily point. */
const seriesTiming = (_: ReadonlyArray<DailyPoint>, storedAt: number): Timing => freshFor(Duration.millis(millisUntilNextDailyPoint(storedAt)))

const makeCoinbaseSource = Effect.gen(function*() {
  const config = yield* CoinbaseConfig
  const client = yield* CoinbaseClient
  const products = yield* CoinbaseProducts
  const kept = makeKeptSeries(yield* DailyHistory, "coinbase", {
    seriesDays: SERIES_DAYS,
    // Day D's 00:00 UTC point is day D-1's close, once Coinbase's clock (not ours) has passed D: kept for ever.
    closes: ({ productId }: SeriesOf, range) =>
      Effect.map(
        client.dailyCandles(productId, range.from - DAY_MS, range.to - DAY_MS),
        ({ asOf, closes }) => asMidnightPoints(closes, asOf).filter(([day]) => day >= range.from && day <= range.to)
      )
  })
  const stats = yield* makeCopies<Stats>({
    name: "Coinbase prices",
    source: "coinbase",
    value: StatsSchema,
    timing: () => freshFor(Duration.millis(STATS_REUSE_MS)),
    fetch: (keys) => Effect.forEach(keys, (key) => Effect.map(client.stats(key.slice(STATS.length)), (found) => [key, found] as const)),
    onFailure: { lastGoodMs: 0, retryMs: config.productsRetryMs }
  })
  // What each series key was asked for: its fetch needs the product, which the key (shared with other instances) does
  // not name. An entry a pair Coinbase lists, at most.
  const asked = new Map<string, SeriesOf>()
  const series = yield* makeCopies<ReadonlyArray<DailyPoint>>({
    name: "Coinbase daily points",
    source: "coinbase",
    value: SeriesSchema,
    timing: seriesTiming,
    fetch: (keys) => Effect.forEach(keys, (key) => Effect.map(kept.fetch(asked.get(key)!), (points) => [key, points] as const)),
    onFailure: { lastGoodMs: 0, retryMs: config.productsRetryMs }
  })

  const rateOf = (wanted: WantedCoin, currency: string): Effect.Effect<SecondRate, SourceError> =>
    Effect.gen(function*() {
      const curated = curatedCoinFor(wanted.symbol)
      if (curated === undefined || curated.id !== wanted.id) return yield* Effect.fail(notServed(`${wanted.symbol} is not a curated coin`))
      const product = yield* products.productFor(wanted.symbol, currency)
      if (product === undefined) return yield* Effect.fail(notServed(`Coinbase lists no ${wanted.symbol}-${currency.toUpperCase()}`))
      const wantedSeries = { coin: wanted.id, currency, productId: product.id }
      asked.set(seriesKey(wantedSeries), wantedSeries)
      const [points, price] = yield* Effect.all([
        series.get(seriesKey(wantedSeries)),
        stats.get(STATS + product.id)
      ], { concurrency: 2 })
      const changes = changesFromSeries(points.value)
      return {
        name: curated.name,
        price: price.value.last,
        change: { "24h": change24h(price.value), "7d": changes["7d"], "30d": changes["30d"] },
        series: points.value,
        asOf: price.storedAt,
        holdsUntil: price.storedAt + STATS_REUSE_MS
      }
    })

  return SecondSource.of({
    sourcing: { source: "coinbase", attribution: COINBASE_ATTRIBUTION },
    ratesFor: (coins, currency) =>
      Effect.gen(function*() {
        const { deadline } = yield* Spend
        const now = yield* Clock.currentTimeMillis
        const outcomes = yield* Effect.forEach(coins, (wanted) =>
          rateOf(wanted, currency).pipe(
            Effect.timeoutOrElse({
              duration: Duration.millis(Math.max(0, deadline - now)),
              orElse: () => Effect.fail(sourceError("coinbase", "Transient", "no answer within the request's budget"))
            }),
            Effect.match({
              onFailure: (error): SecondOutcome => ({ _tag: "Failed", error }),
              onSuccess: (rate): SecondOutcome => ({ _tag: "Served", rate })
            })
          ), { concurrency: "unbounded" })
        return new Map(coins.map((wanted, i) => [wanted.id, outcomes[i]!] as const))
      }).pipe(Effect.withSpan("rates.coinbase", { attributes: { coins: coins.length } }, { captureStackTrace: false }))
  })
})

export const layer: Layer.Layer<SecondSource, never, CoinbaseClient | CoinbaseConfig | CoinbaseProducts | DailyHistory | CopyStore> = Layer.effect(SecondSource, makeCoinbaseSource)
