/** `npm run smoke:live`: one call of each kind to the real providers, and their feed, by the service's own clients (5 CoinGecko credits). */
import { Clock, Duration, Effect, Fiber, Layer, Queue } from "effect"
import type { HttpClient } from "effect/http"
import type { Socket } from "effect/socket"
import { layerMemory as durableCellMemory } from "../platform/durableCell/memory.ts"
import { ProcessCount } from "../platform/processCount/ProcessCount.ts"
import { CoinbaseClient } from "./coinbase/CoinbaseClient.ts"
import { CoinbaseConfig } from "./coinbase/CoinbaseConfig.ts"
import { type FeedSink, runFeed } from "./coinbase/feed/connection.ts"
import { majorsOf } from "./coinbase/products.ts"
import { CoinGeckoClient } from "./coingecko/CoinGeckoClient.ts"
import { CoinGeckoConfig } from "./coingecko/CoinGeckoConfig.ts"
import { MonthlyBudget } from "./coingecko/credits/MonthlyBudget.ts"

interface LiveCheckResult {
  readonly provider: string
  readonly call: string
  readonly ok: boolean
  readonly detail: string
}
const DAY_MS = 86_400_000

const check = <A, E extends { readonly message: string }>(provider: string, call: string, effect: Effect.Effect<A, E>, describe: (a: A) => string) =>
  effect.pipe(
    Effect.match({
      onSuccess: (a): LiveCheckResult => ({ provider, call, ok: true, detail: describe(a) }),
      onFailure: (error): LiveCheckResult => ({ provider, call, ok: false, detail: error.message })
    })
  )

const coinGecko = Effect.gen(function*() {
  const client = yield* CoinGeckoClient
  const config = yield* CoinGeckoConfig
  const now = yield* Clock.currentTimeMillis
  const plan = `${config.apiPlan}${config.apiKey === undefined ? ", keyless" : ", with COINGECKO_API_KEY"}`
  return yield* Effect.all([
    check("coingecko", "GET /simple/supported_vs_currencies", client.supportedCurrencies, (list) => `${list.length} currencies (${plan})`),
    check("coingecko", "GET /coins/list", client.coinList, (list) => `${list.length} coins`),
    check("coingecko", "GET /coins/markets (rank page 1)", client.coinsByRank(1, 250), (rows) => `${rows.length} coins by market cap`),
    check("coingecko", "GET /coins/markets?ids=bitcoin", client.marketsByIds("usd", ["bitcoin"]), (rows) => `bitcoin at ${rows[0]?.current_price} USD`),
    check("coingecko", "GET /coins/bitcoin/market_chart/range (7 days)", client.marketChartRange("bitcoin", "usd", Math.floor((now - 7 * DAY_MS) / 1000), Math.floor(now / 1000)), (points) => `${points.length} daily points`)
  ])
}).pipe(
  Effect.provide(CoinGeckoClient.layer.pipe(Layer.provideMerge(MonthlyBudget.layer), Layer.provide(Layer.merge(durableCellMemory, ProcessCount.layerLocal(1)))))
)

/** `seconds` of the feed, as the service reads it, on the majors Coinbase lists. */
const feed = (seconds: number, productIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const config = yield* CoinbaseConfig
    const call = `WebSocket ${config.feedUrl ?? "(COINBASE_WS_URL=none)"} (${seconds} s, ${productIds.length} pairs)`
    if (config.feedUrl === undefined || productIds.length === 0) {
      return { provider: "coinbase", call, ok: false, detail: config.feedUrl === undefined ? "the feed is off" : "no pair to subscribe" }
    }
    const heard = { ticks: 0, heartbeats: 0, ends: 0, refused: [] as Array<string>, unreadable: new Set<string>() }
    const sink: FeedSink = {
      read: (messages) => Effect.sync(() => {
        for (const message of messages) heard[message.type === "ticker" ? "ticks" : "heartbeats"]++
      }),
      disconnected: () => Effect.sync(() => void heard.ends++),
      refused: (productId) => Effect.sync(() => void heard.refused.push(productId)),
      unreadable: (kind) => Effect.sync(() => void heard.unreadable.add(kind))
    }
    const added = yield* Queue.unbounded<string>()
    const running = yield* Effect.forkChild(runFeed(sink, { wanted: () => productIds, added }, { ...config, url: config.feedUrl }))
    yield* Effect.sleep(Duration.seconds(seconds))
    yield* Fiber.interrupt(running)
    const problems = [
      ...heard.refused.map((id) => `${id} refused`),
      ...[...heard.unreadable].map((kind) => `unreadable ${kind}`),
      ...(heard.ends > 0 ? [`the connection ended ${heard.ends} time(s)`] : []),
      ...(heard.ticks + heard.heartbeats === 0 ? ["nothing read"] : [])
    ]
    return { provider: "coinbase", call, ok: problems.length === 0, detail: [`${heard.ticks} ticks, ${heard.heartbeats} heartbeats`, ...problems].join("; ") }
  })

const coinbase = (feedSeconds: number) =>
  Effect.gen(function*() {
    const client = yield* CoinbaseClient
    const now = yield* Clock.currentTimeMillis
    const products = yield* Effect.result(client.products)
    const listed = products._tag === "Success" ? products.success : []
    const rest = yield* Effect.all([
      Effect.succeed<LiveCheckResult>(products._tag === "Success"
        ? { provider: "coinbase", call: "GET /products", ok: true, detail: `${listed.length} products, ${majorsOf(listed).length} majors` }
        : { provider: "coinbase", call: "GET /products", ok: false, detail: products.failure.message }),
      check("coinbase", "GET /products/BTC-USD/ticker", client.ticker("BTC-USD"), (ticker) => `BTC-USD at ${ticker.price}`),
      check("coinbase", "GET /products/BTC-USD/stats", client.stats("BTC-USD"), (stats) => `24 h open ${stats.open}`),
      check("coinbase", "GET /products/BTC-USD/candles (7 days)", client.dailyCandles("BTC-USD", now - 7 * DAY_MS, now), (candles) => `${candles.closes.length} daily closes`)
    ])
    return [...rest, yield* feed(feedSeconds, majorsOf(listed))]
  }).pipe(Effect.provide(CoinbaseClient.layer))

/** Every check, from the rates configuration (the environment): CoinGecko's, then Coinbase's. */
export const ratesLiveCheck = (feedSeconds: number): Effect.Effect<ReadonlyArray<LiveCheckResult>, never, HttpClient.HttpClient | Socket.WebSocketConstructor> =>
  Effect.all([coinGecko, coinbase(feedSeconds)]).pipe(
    Effect.map(([a, b]) => [...a, ...b]),
    Effect.provide(Layer.mergeAll(CoinGeckoConfig.layer, CoinbaseConfig.layer)),
    Effect.catch((error) => Effect.succeed([{ provider: "rates", call: "configuration", ok: false, detail: error.message }]))
  )
