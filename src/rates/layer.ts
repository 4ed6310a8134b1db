/**
 * The use case (historicalRates.ts) over its adapters. The order of sources, stated only here: 1. Coinbase's live quotes
 * (coinbase/liveQuotes.ts, `COINBASE_WS_URL`); 2. CoinGecko for every step (coingecko/); 3. Coinbase for what it cannot serve now
 * (`RATES_FALLBACK`).
 */
import { ConfigProvider, Effect, Layer } from "effect"
import type { HttpClient } from "effect/http"
import type { Redis } from "effect/persistence"
import type { Socket } from "effect/socket"
import type { DurableCell } from "../platform/durableCell/DurableCell.ts"
import * as DurableCellMemory from "../platform/durableCell/memory.ts"
import { Leadership } from "../platform/leadership/Leadership.ts"
import * as LeadershipRedis from "../platform/leadership/redis.ts"
import { ProcessCount } from "../platform/processCount/ProcessCount.ts"
import * as ProcessCountRedis from "../platform/processCount/redis.ts"
import * as UpstreamHttp from "../platform/upstreamHttp.ts"
import { RatesAnswerMemo } from "./answer.ts"
import { CoinbaseClient } from "./coinbase/CoinbaseClient.ts"
import { CoinbaseConfig, type CoinbaseConfigShape } from "./coinbase/CoinbaseConfig.ts"
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
import { DailyHistory } from "./history/DailyHistory.ts"
import { LiveQuotes, SecondSource } from "./ports.ts"
import type { RatesProvider } from "./RatesProvider.ts"
import { layerGuardStoresRedis } from "./redisDown.ts"

/** Coinbase's live quotes and second source, built only when configured; both share one client (one 10/s bucket) and product list. */
const coinbaseSources = <R, L>(client: Layer.Layer<CoinbaseClient, never, R>, leadership: Layer.Layer<Leadership, never, L>) => {
  const coinbase = Layer.mergeAll(client, CoinbaseProducts.layer.pipe(Layer.provide(client)), leadership)
  return Layer.mergeAll(
    Layer.unwrap(Effect.map(CoinbaseConfig, (config) =>
      config.feedUrl === undefined ? LiveQuotes.layerNone : CoinbaseLiveQuotes.layer(config.feedUrl).pipe(Layer.provide(coinbase)))),
    Layer.unwrap(Effect.map(CoinbaseConfig, (config) =>
      config.fallback === "none" ? SecondSource.layerNone : CoinbaseSecondSource.layer.pipe(Layer.provide(coinbase))))
  )
}

const useCase = Layer.unwrap(Effect.map(CoinGeckoConfig, (config) => HistoricalRates.layer({ requestBudgetMs: config.requestBudgetMs, lastGoodSeconds: config.staleTtlHours * 3_600 })))

/** All but copies and guards. The answer memo and demand are the edge's too: one instance each within one build (src/server.ts). */
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

/** Over the CoinGecko client, month's budget and copies given; Coinbase's guards in memory, its feed held alone. */
const layerOverCoinGecko = wired(CoinbaseClient.layer, Leadership.layerAlone)

/** The memory store of copies, bounded by COINGECKO_CACHE_MAX_MB. */
const memoryCopies = Layer.unwrap(Effect.map(CoinGeckoConfig, (config) => CopyStore.layerMemory({ maxBytes: config.cacheMaxMegabytes * 1024 * 1024 })))

type Needs = HttpClient.HttpClient | Socket.WebSocketConstructor | DurableCell | DailyHistory | CoinGeckoConfig | CoinbaseConfig

/** This host's workers share the limits (WEB_CONCURRENCY, as CoinGecko's configuration reads it). */
const localProcesses = Layer.unwrap(Effect.map(CoinGeckoConfig, (config) => ProcessCount.layerLocal(config.workers)))

/** One instance over the copies given: budgets and breakers in memory; also the month's budget. */
const layerOverStore: Layer.Layer<RatesProvider | MonthlyBudget, never, Needs | CopyStore> = layerOverCoinGecko.pipe(
  Layer.provide(CoinGeckoClient.layer),
  Layer.provideMerge(MonthlyBudget.layer.pipe(Layer.provide(localProcesses)))
)

/** One instance, its configuration given: copies in memory too. */
const layerConfigured: Layer.Layer<RatesProvider | MonthlyBudget, never, Needs> = layerOverStore.pipe(Layer.provide(memoryCopies))

/** Several instances: copies, lists, budgets and breakers shared in Redis under `keyPrefix`; one holds the feed (feed/relay.ts). */
export const layerRedisConfigured = (keyPrefix: string): Layer.Layer<RatesProvider | MonthlyBudget, never, Needs | Redis.Redis> => {
  const processes = Layer.unwrap(Effect.map(CoinGeckoConfig, (config) => ProcessCountRedis.layerRedis({ prefix: keyPrefix, workers: config.workers })))
  const guards = layerGuardStoresRedis({ prefix: keyPrefix })
  return wired(CoinbaseClient.layerNoDeps.pipe(Layer.provide(guards)), LeadershipRedis.layerRedis({ prefix: keyPrefix })).pipe(
    Layer.provide(Layer.mergeAll(CoinGeckoClient.layerNoDeps.pipe(Layer.provide(guards)), CopyStore.layerRedis({ prefix: `${keyPrefix}rates-cache:` }))),
    Layer.provideMerge(MonthlyBudget.layer),
    Layer.provide(processes)
  )
}

type ConfigError = Layer.Error<typeof CoinGeckoConfig.layer> | Layer.Error<typeof CoinbaseConfig.layer>
const configs = Layer.mergeAll(CoinGeckoConfig.layer, CoinbaseConfig.layer)

/** One instance, configured from the current ConfigProvider (the environment; a test's). */
export const layer: Layer.Layer<RatesProvider | MonthlyBudget, ConfigError, Exclude<Needs, CoinGeckoConfig | CoinbaseConfig>> = layerConfigured.pipe(
  Layer.provide(configs)
)

/** Several instances (REDIS_URL), configured from the current ConfigProvider. */
export const layerRedis = (keyPrefix: string): Layer.Layer<RatesProvider | MonthlyBudget, ConfigError, Exclude<Needs, CoinGeckoConfig | CoinbaseConfig> | Redis.Redis> =>
  layerRedisConfigured(keyPrefix).pipe(Layer.provide(configs))

/** Credits aplenty: the month's pace never sets a refresh interval nor refuses a call. */
const CREDITS_APLENTY = 1_000_000_000

/** What a test gives the use case; the rest is at the defaults `layerTest` states. */
interface TestOptions<E, R> {
  /** CoinGecko's client: a stand-in; default the real one at COINGECKO_BASE_URL (an emulator's), over `upstream`. */
  readonly coinGecko?: Layer.Layer<CoinGeckoClient, E, R> | undefined
  /**
   * The only configuration read (COINGECKO_*, COINBASE_*, RATES_FALLBACK), over the test defaults: Coinbase
   * neither second source nor feed (RATES_FALLBACK=none, COINBASE_WS_URL=none); `undefined` unsets.
   */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** Coinbase's guards replaced (short timeouts, a quick breaker). */
  readonly coinbase?: Partial<CoinbaseConfigShape> | undefined
  /** The store of copies; default memory, within COINGECKO_CACHE_MAX_MB. */
  readonly copies?: Layer.Layer<CopyStore, E, R> | undefined
  /**
   * The month's credits. Default: with a stand-in client, credits aplenty in memory; with the real one, the
   * ledger (COINGECKO_CALLS_PER_MONTH a month) kept in `cell`.
   */
  readonly budget?: Layer.Layer<MonthlyBudget, E, R> | undefined
  /** Where the ledger is kept; default memory. */
  readonly cell?: Layer.Layer<DurableCell, E, R> | undefined
  /** The kept history; default memory. */
  readonly history?: Layer.Layer<DailyHistory, E, R> | undefined
  /** The providers' HTTP client and WebSocket; default Node's, with a test's User-Agent. */
  readonly upstream?: Layer.Layer<UpstreamHttp.Upstream, E, R> | undefined
}

/**
 * The real use case as a test builds it, in one line: over CoinGecko's client given (a stand-in), or the real
 * one against an emulator, every other supporting Layer at a test's default unless given. One instance (as
 * `layerConfigured`): budgets, breakers and Coinbase's feed in memory. Also the month's budget.
 */
export const layerTest = <E = never, R = never>(options: TestOptions<E, R> = {}): Layer.Layer<RatesProvider | MonthlyBudget, ConfigError | E, R> => {
  const env = Object.entries({ RATES_FALLBACK: "none", COINBASE_WS_URL: "none", ...options.env }).flatMap(([name, value]) => value === undefined ? [] : [[name, value] as const])
  const config = Layer.mergeAll(CoinGeckoConfig.layer, options.coinbase === undefined ? CoinbaseConfig.layer : CoinbaseConfig.layerWith(options.coinbase)).pipe(
    Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: Object.fromEntries(env) })))
  )
  const budget = options.budget ?? (options.coinGecko === undefined
    ? MonthlyBudget.layer.pipe(Layer.provide(Layer.merge(options.cell ?? DurableCellMemory.layerMemory, localProcesses)))
    : MonthlyBudget.layerMemory(CREDITS_APLENTY))
  const client: Layer.Layer<CoinGeckoClient, E, R | Layer.Services<typeof CoinGeckoClient.layer>> = options.coinGecko ?? CoinGeckoClient.layer
  return layerOverCoinGecko.pipe(
    Layer.provide(client),
    Layer.provideMerge(budget),
    Layer.provide(Layer.mergeAll(options.copies ?? memoryCopies, options.history ?? DailyHistory.layerMemory, options.upstream ?? UpstreamHttp.layerTest)),
    Layer.provide(config)
  )
}
