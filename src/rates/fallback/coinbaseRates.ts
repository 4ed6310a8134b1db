/**
 * The second source served by Coinbase Exchange (CONTRACT C4, "Second source"), for coins of the
 * curated map (symbols.ts) that Coinbase trades in the currency asked: a ticker outside the map could
 * name another asset on Coinbase than the coin CoinGecko resolved.
 *
 * Per coin: the price and 24 h change from `stats` (last, open); the series from the kept history
 * (history/, source `coinbase`), only the days it lacks asked of Coinbase as daily candles, restamped
 * as the price at the next 00:00 UTC (coinbase/candles.ts `asMidnightPoints`) like CoinGecko's points;
 * 7 d and 30 d changes measured on that series. Stats are reused for `STATS_REUSE_MS`, and so is an
 * answer made of them: never long, so that CoinGecko serves again as soon as it can.
 * Coinbase's faults are its own (its client has its breaker and backoff) and reach no CoinGecko answer.
 */
import { Clock, Duration, Effect, Option } from "effect"
import { asMidnightPoints, change24h } from "../coinbase/candles.ts"
import { type CoinbaseClientShape, CoinbaseError, type Stats } from "../coinbase/CoinbaseClient.ts"
import { changesFromSeries, DAY_MS, type DailyPoint } from "../dailySeries.ts"
import type { DailyHistoryShape, HistoryError } from "../history/DailyHistory.ts"
import { coveredBy, missingRanges, neededDays } from "../history/heldCharts.ts"
import { curatedCoinFor } from "../symbols.ts"
import type { SecondOutcome, SecondRate, SecondSourceShape, WantedCoin } from "./SecondSource.ts"

export const COINBASE_ATTRIBUTION = "Data provided by Coinbase Exchange"

/** How long a Coinbase price, and an answer made of it, is reused: a minute. */
export const STATS_REUSE_MS = 60_000

const notServed = (detail: string) => new CoinbaseError({ kind: "not-found", detail, retryAfterSeconds: 0 })

export const makeCoinbaseRates = (client: CoinbaseClientShape, history: DailyHistoryShape, seriesDays: number): SecondSourceShape => {
  const statsHeld = new Map<string, { readonly stats: Stats; readonly at: number }>()
  let storeFailing = false
  const storeFailed = (error: HistoryError) =>
    Effect.suspend(() => {
      if (storeFailing) return Effect.void
      storeFailing = true
      return Effect.logWarning("rates history unavailable; Coinbase points fetched without it", error.message)
    })

  const statsOf = (productId: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const held = statsHeld.get(productId)
      if (held !== undefined && now < held.at + STATS_REUSE_MS) return held
      const stats = yield* client.stats(productId)
      const at = yield* Clock.currentTimeMillis
      const fetched = { stats, at }
      statsHeld.set(productId, fetched)
      return fetched
    })

  /** The year of points: held days, the missing ones fetched as candles of the day before and kept. */
  const seriesOf = (coin: string, currency: string, productId: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const need = neededDays(now, seriesDays)
      const held = yield* history.read(coin, currency, "coinbase").pipe(
        Effect.map(Option.getOrUndefined),
        Effect.tap(() => Effect.sync(() => void (storeFailing = false))),
        Effect.catchTag("HistoryError", (error) => Effect.as(storeFailed(error), undefined))
      )
      const byDay = new Map<number, number>()
      for (const [day, price] of held?.points ?? []) if (day >= need.from && day <= need.to) byDay.set(day, price)
      for (const range of missingRanges(held, need)) {
        // The point at 00:00 UTC of day D is the close of the candle of day D-1.
        const closes = yield* client.dailyCandles(productId, range.from - DAY_MS, range.to - DAY_MS)
        const points = asMidnightPoints(closes, now).filter(([day]) => day >= range.from && day <= range.to)
        for (const [day, price] of points) if (!byDay.has(day)) byDay.set(day, price)
        const added = coveredBy(range, points, need)
        if (added !== undefined) yield* history.write(coin, currency, "coinbase", added).pipe(Effect.catchTag("HistoryError", storeFailed))
      }
      return [...byDay].sort((a, b) => a[0] - b[0]).map(([day, price]): DailyPoint => [day, price] as const)
    })

  const rateOf = (wanted: WantedCoin, currency: string): Effect.Effect<SecondRate, CoinbaseError> =>
    Effect.gen(function*() {
      const curated = curatedCoinFor(wanted.symbol)
      if (curated === undefined || curated.id !== wanted.id) return yield* Effect.fail(notServed(`${wanted.symbol} is not a curated coin`))
      const product = yield* client.productFor(wanted.symbol, currency)
      if (product === undefined) return yield* Effect.fail(notServed(`Coinbase lists no ${wanted.symbol}-${currency.toUpperCase()}`))
      const [series, { at, stats }] = yield* Effect.all([seriesOf(wanted.id, currency, product.id), statsOf(product.id)], { concurrency: 2 })
      const changes = changesFromSeries(series)
      return {
        name: curated.name,
        price: stats.last,
        change: { "24h": change24h(stats), "7d": changes["7d"], "30d": changes["30d"] },
        series,
        asOf: at,
        holdsUntil: at + STATS_REUSE_MS
      }
    })

  const ratesFor: SecondSourceShape["ratesFor"] = (coins, currency, deadline) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const outcomes = yield* Effect.forEach(coins, (wanted) =>
        rateOf(wanted, currency).pipe(
          Effect.timeoutOrElse({
            duration: Duration.millis(Math.max(0, deadline - now)),
            orElse: () => Effect.fail(new CoinbaseError({ kind: "transient", detail: "no answer within the request's budget", retryAfterSeconds: 0 }))
          }),
          Effect.match({
            onFailure: (error): SecondOutcome => ({ _tag: "Failed", error }),
            onSuccess: (rate): SecondOutcome => ({ _tag: "Served", rate })
          })
        ), { concurrency: "unbounded" })
      return new Map(coins.map((wanted, i) => [wanted.id, outcomes[i]!] as const))
    }).pipe(Effect.withSpan("rates.coinbase", { attributes: { coins: coins.length } }, { captureStackTrace: false }))

  return { enabled: true, attribution: COINBASE_ATTRIBUTION, ratesFor }
}
