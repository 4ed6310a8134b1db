/**
 * The rates capability wired: the use case (historicalRates.ts) over its ports (ports.ts), each served
 * by an adapter, as configured. The order of sources is stated here and only here:
 *   1. latest prices: Coinbase Exchange's live quotes first, for the pairs it lists (coinbase/liveQuotes.ts,
 *      `COINBASE_WS_URL`, the public feed by default; `none`: no live quotes);
 *   2. CoinGecko for every step: the currency and symbols, the other latest prices, daily points (coingecko/);
 *   3. for the coins it cannot serve now, Coinbase Exchange (coinbase/, `RATES_FALLBACK=coinbase`, the
 *      default), or none (`RATES_FALLBACK=none`).
 * Where copies and guards live: in memory for one instance, through Redis for several (`layerRedis`);
 * the month's credits in the `DurableCell` and the kept history in the `DailyHistory` given.
 */
import { Effect, Layer } from "effect"
import type { HttpClient } from "effect/http"
import type { Redis } from "effect/persistence"
import type { Socket } from "effect/socket"
import type { DurableCell } from "../platform/durableCell/DurableCell.ts"
import { Leadership } from "../platform/leadership/Leadership.ts"
import * as LeadershipRedis from "../platform/leadership/redis.ts"
import { RatesAnswerMemo } from "./answer.ts"
import { CoinbaseClient } from "./coinbase/CoinbaseClient.ts"
import { CoinbaseConfig } from "./coinbase/CoinbaseConfig.ts"
import * as CoinbaseLiveQuotes from "./coinbase/liveQuotes.ts"
import { CoinbaseProducts } from "./coinbase/products.ts"
import * as CoinbaseSecondSource from "./coinbase/secondSource.ts"
import { CoinGeckoClient } from "./coingecko/CoinGeckoClient.ts"
import { CoinGeckoConfig } from "./coingecko/CoinGeckoConfig.ts"
import * as CoinGeckoDailyPoints from "./coingecko/dailyPoints.ts"
import * as CoinGeckoDirectory from "./coingecko/directory.ts"
import * as CoinGeckoLatestPrices from "./coingecko/latestPrices.ts"
import { MonthlyBudget } from "./coingecko/credits/MonthlyBudget.ts"
import { CopyStore } from "./copies/CopyStore.ts"
import * as HistoricalRates from "./historicalRates.ts"
import type { DailyHistory } from "./history/DailyHistory.ts"
import { LiveQuotes, SecondSource } from "./ports.ts"
import type { RatesProvider } from "./RatesProvider.ts"

/**
 * What Coinbase serves, over the Coinbase client given (memory or Redis guards), built only when used:
 * the live quotes by `COINBASE_WS_URL`, the second source by `RATES_FALLBACK`. Both share one client (one
 * 10-a-second bucket) and one product list: Layers are built once per build.
 */
const coinbaseSources = <R, L>(client: Layer.Layer<CoinbaseClient, never, R>, leadership: Layer.Layer<Leadership, never, L>) => {
  const coinbase = Layer.mergeAll(client, CoinbaseProducts.layer.pipe(Layer.provide(client)), leadership)
  return Layer.mergeAll(
    Layer.unwrap(Effect.map(CoinbaseConfig, (config) =>
      config.feedUrl === undefined ? LiveQuotes.layerNone : CoinbaseLiveQuotes.layer(config.feedUrl).pipe(Layer.provide(coinbase)))),
    Layer.unwrap(Effect.map(CoinbaseConfig, (config) =>
      config.fallback === "none" ? SecondSource.layerNone : CoinbaseSecondSource.layer.pipe(Layer.provide(coinbase))))
  )
}

/** The use case, its request budget from configuration. */
const useCase = Layer.unwrap(Effect.map(CoinGeckoConfig, (config) => HistoricalRates.layer({ requestBudgetMs: config.requestBudgetMs })))

/**
 * Everything but where copies and guards live. The memo of answers and the callers' demand are the
 * edge's too: provided within the server's one build (src/server.ts), `RatesAnswerMemo.layer` and
 * `RatesDemand.layer` are one instance each for the edge, the use case and the latest prices.
 */
const wired = <R, L>(coinbaseClient: Layer.Layer<CoinbaseClient, never, R>, leadership: Layer.Layer<Leadership, never, L>) =>
  useCase.pipe(
    Layer.provide(Layer.mergeAll(
      CoinGeckoDirectory.layer,
      CoinGeckoLatestPrices.layer,
      CoinGeckoDailyPoints.layer,
      coinbaseSources(coinbaseClient, leadership),
      RatesAnswerMemo.layer
    ).pipe(Layer.provideMerge(CoinGeckoLatestPrices.RatesDemand.layer)))
  )

/**
 * Over a CoinGecko client, month's budget and store of copies given (tests: stand-ins); Coinbase's guards
 * in memory, its feed held by this process alone.
 */
export const layerOverCoinGecko = wired(CoinbaseClient.layer, Leadership.layerAlone)

/** The memory store of copies, bounded by COINGECKO_CACHE_MAX_MB. */
const memoryCopies = Layer.unwrap(Effect.map(CoinGeckoConfig, (config) => CopyStore.layerMemory({ maxBytes: config.cacheMaxMegabytes * 1024 * 1024 })))

type Needs = HttpClient.HttpClient | Socket.WebSocketConstructor | DurableCell | DailyHistory | CoinGeckoConfig | CoinbaseConfig

/**
 * One instance over the store of copies given (tests: one they can age), its configuration given (tests
 * replace Coinbase's guards with `CoinbaseConfig.layerWith`): budgets and breakers in memory. Also gives
 * the month's budget (its ledger), for metrics and tests.
 */
export const layerOverStore: Layer.Layer<RatesProvider | MonthlyBudget, never, Needs | CopyStore> = layerOverCoinGecko.pipe(
  Layer.provide(CoinGeckoClient.layer),
  Layer.provideMerge(MonthlyBudget.layer)
)

/** One instance, its configuration given: copies in memory too. */
export const layerConfigured: Layer.Layer<RatesProvider | MonthlyBudget, never, Needs> = layerOverStore.pipe(Layer.provide(memoryCopies))

/**
 * Several instances, its configuration given: the copies, the lists, CoinGecko's budgets and breaker and
 * Coinbase's bucket and breaker shared through Redis under `keyPrefix`: what one instance fetched serves
 * the others, and all stay within one budget; one instance holds Coinbase's feed for all (feed/relay.ts).
 * Single flight stays per instance.
 */
export const layerRedisConfigured = (keyPrefix: string): Layer.Layer<RatesProvider | MonthlyBudget, never, Needs | Redis.Redis> =>
  wired(CoinbaseClient.layerRedis(keyPrefix), LeadershipRedis.layerRedis({ prefix: keyPrefix })).pipe(
    Layer.provide(Layer.mergeAll(CoinGeckoClient.layerRedis(keyPrefix), CopyStore.layerRedis({ prefix: `${keyPrefix}rates-cache:` }))),
    Layer.provideMerge(MonthlyBudget.layer)
  )

type ConfigError = Layer.Error<typeof CoinGeckoConfig.layer> | Layer.Error<typeof CoinbaseConfig.layer>
const configs = Layer.mergeAll(CoinGeckoConfig.layer, CoinbaseConfig.layer)

/** One instance, configured from the current ConfigProvider (the environment; a test's). */
export const layer: Layer.Layer<RatesProvider | MonthlyBudget, ConfigError, Exclude<Needs, CoinGeckoConfig | CoinbaseConfig>> = layerConfigured.pipe(
  Layer.provide(configs)
)

/** Several instances (REDIS_URL), configured from the current ConfigProvider. */
export const layerRedis = (keyPrefix: string): Layer.Layer<RatesProvider | MonthlyBudget, ConfigError, Exclude<Needs, CoinGeckoConfig | CoinbaseConfig> | Redis.Redis> =>
  layerRedisConfigured(keyPrefix).pipe(Layer.provide(configs))
