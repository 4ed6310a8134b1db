/**
 * `LiveQuotes` from Coinbase (CONTRACT C4, "Live quotes"), curated coins only (symbols.ts), at no CoinGecko credit:
 * a pair's last feed tick (feed/); while the feed is down for it, its REST ticker and stats held as copies for
 * `restQuoteMs`; else the coin is left to `LatestPrices` (CoinGecko), never served stale from here.
 */
import { Clock, Duration, Effect, Layer, Schedule, Schema } from "effect"
import type { Socket } from "effect/socket"
import type { Leadership } from "../../platform/leadership/Leadership.ts"
import { recordLivePairs } from "../../observability/metrics.ts"
import { makeCopies } from "../copies/Copies.ts"
import type { CopyStore } from "../copies/CopyStore.ts"
import { type LiveQuote, LiveQuotes, type Served, type WantedCoin } from "../ports.ts"
import { curatedCoinFor } from "../symbols.ts"
import { Spend, spendingUntil } from "../upstream.ts"
import { change24h } from "./candles.ts"
import { COINBASE_ATTRIBUTION, CoinbaseClient } from "./CoinbaseClient.ts"
import { CoinbaseConfig } from "./CoinbaseConfig.ts"
import { makeQuoteBoard } from "./feed/quoteBoard.ts"
import { runLiveFeed } from "./feed/relay.ts"
import { CoinbaseProducts, majorsOf } from "./products.ts"

/** How long an answer made of live quotes may be repeated: a tick changes it at most once a second. */
const LIVE_HOLD_MS = 1_000
const RestQuoteSchema = Schema.Struct({ price: Schema.Finite, open: Schema.Finite })
type RestQuote = typeof RestQuoteSchema.Type
/** A REST quote's store key: this, then its product id. */
const TICKER = "rates:v2:coinbase-ticker:"
const makeLiveQuotes = (feedUrl: string) =>
  Effect.gen(function*() {
    const config = yield* CoinbaseConfig
    const client = yield* CoinbaseClient
    const products = yield* CoinbaseProducts
    const board = makeQuoteBoard({ silenceMs: config.pairSilenceMs, behindMs: config.pairBehindMs, maxPairs: config.feedMaxPairs })
    const feed = yield* runLiveFeed(board, { ...config, url: feedUrl })
    // The list the feed's refusals were made under: a new one (reloaded) may list a pair again.
    let listOfRefusals: unknown
    const newList = (list: unknown) => {
      if (list === listOfRefusals) return
      listOfRefusals = list
      feed.forgetRefusals()
    }
    yield* Effect.forkScoped(Effect.flatMap(Clock.currentTimeMillis, (now) => products.list.pipe(spendingUntil(now + config.productsRetryMs))).pipe(
      Effect.retry(Schedule.spaced(Duration.millis(config.productsRetryMs))),
      Effect.flatMap((list) => {
        newList(list)
        return feed.follow(majorsOf(list))
      })
    ))
    yield* Effect.forkScoped(Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const { followed, live, oldestAgeMs } = board.summary(now)
      return Effect.sync(() => recordLivePairs(live, followed, oldestAgeMs / 1000))
    }).pipe(Effect.repeat(Schedule.spaced(Duration.seconds(5)))))
    const restQuotes = yield* makeCopies<RestQuote>({
      name: "Coinbase tickers",
      source: "coinbase",
      value: RestQuoteSchema,
      // Refreshed ahead while asked, served while the refresh runs: at most about twice `restQuoteMs` old.
      timing: () => ({ ttl: Duration.millis(config.restQuoteMs), refreshAhead: Duration.millis(config.restQuoteMs / 3), grace: Duration.millis(config.restQuoteMs) }),
      fetch: (keys) =>
        Effect.forEach(keys, (key) => {
          const productId = key.slice(TICKER.length)
          return Effect.map(Effect.all([client.ticker(productId), client.stats(productId)], { concurrency: 2 }), ([ticker, stats]) =>
            [key, { price: ticker.price, open: stats.open }] as const)
        }, { concurrency: "unbounded" }),
      onFailure: { lastGoodMs: 0, retryMs: config.productsRetryMs },
      // Instances sharing Redis ask one at a time: one's call serves the others (two calls a pair, a second at most).
      loadLeaseMs: config.attemptTimeoutMs
    })

    const quotes = (coins: ReadonlyArray<WantedCoin>, currency: string) =>
      Effect.gen(function*() {
        const { charge, deadline } = yield* Spend
        const now = yield* Clock.currentTimeMillis
        newList(yield* products.held)
        const holdsUntil = now + LIVE_HOLD_MS
        const found = new Map<string, Served<LiveQuote>>()
        const down = new Map<string, string>() // ticker key → coin id
        for (const coin of coins) {
          const curated = curatedCoinFor(coin.symbol)
          if (curated === undefined || curated.id !== coin.id) continue
          const product = yield* products.productHeld(coin.symbol, currency)
          if (product === undefined) continue
          yield* feed.follow([product.id])
          const live = board.quote(product.id, now)
          if (live === undefined) down.set(TICKER + product.id, coin.id)
          else found.set(coin.id, { value: { price: live.price, change24h: live.change24h }, storedAt: live.observedAt, stale: false, holdsUntil })
        }
        if (down.size === 0) return found
        // Not the request's whole budget: CoinGecko must still have time for the coins left to it.
        const { served } = yield* restQuotes.getAll([...down.keys()]).pipe(spendingUntil(Math.min(deadline, now + config.restQuoteWaitMs), charge))
        for (const [key, coinId] of down) {
          const quote = served.get(key)
          if (quote === undefined) continue
          const { open, price } = quote.value
          found.set(coinId, {
            value: { price, change24h: change24h({ open, last: price }) },
            storedAt: quote.storedAt,
            stale: false,
            holdsUntil: Math.min(holdsUntil, quote.holdsUntil)
          })
        }
        return found
      }).pipe(Effect.withSpan("rates.live", { attributes: { coins: coins.length } }, { captureStackTrace: false }))

    return LiveQuotes.of({ sourcing: { source: "coinbase", attribution: COINBASE_ATTRIBUTION }, quotes })
  })
/** Live quotes from the feed at `feedUrl`, over the WebSocket given (src/platform/upstreamHttp.ts). */
export const layer = (
  feedUrl: string
): Layer.Layer<LiveQuotes, never, CoinbaseClient | CoinbaseConfig | CoinbaseProducts | CopyStore | Leadership | Socket.WebSocketConstructor> =>
  Layer.effect(LiveQuotes, makeLiveQuotes(feedUrl))
