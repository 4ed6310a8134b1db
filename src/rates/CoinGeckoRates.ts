/**
 * The live `RatesProvider`: CoinGecko behind a cache, single-flight, refresh-ahead and stale-if-error,
 * with the upstream budget shared fairly between callers (CONTRACT C4, "Under abuse and faults").
 *
 * One `historical` call runs in steps, all within `requestBudgetMs` (CONTRACT C4 answers within 10 s
 * whatever the upstream does), each in its own module:
 *   1. currencies.ts: the currency checked against the upstream's list, held in memory (no call);
 *   2. symbolResolution.ts: symbols → coins, the curated map then the coin index (no call);
 *   3. marketData.ts: per coin, the year of daily points (kept in history/, only missing days fetched)
 *      and the latest price and changes (one batched `/coins/markets` call for the cold ones), served
 *      while refreshed behind (staleCache.ts);
 *   4. answer.ts: the C4 body, and until when it may be repeated (`freshUntil`).
 * The lists of steps 1 and 2 are loaded in the background (auxiliary.ts). The cold fetches of step 3
 * are charged to `query.caller` (upstreamGuards.ts); one call's retries, and one request's failures,
 * count once in the circuit breaker. When the upstream fails, last good copies are served and the
 * answer says `stale: true`; only when no copy exists does the upstream's error reach the caller.
 *
 * Usage: `import * as CoinGeckoRates from "./rates/CoinGeckoRates.ts"`, then provide `CoinGeckoRates.layer`
 * (needs an `HttpClient`, e.g. `NodeHttpClient.layerUndici`, and a `DailyHistory`), or
 * `CoinGeckoRates.layerRedis(keyPrefix)` (also needs `Redis.Redis`) when several instances run. Both read `RatesConfig` from the current
 * ConfigProvider (tests: `Layer.provide(configFrom(env))`).
 */
import { Clock, Duration, Effect, Layer, type Scope } from "effect"
import type { HttpClient } from "effect/http"
import type { Redis } from "effect/persistence"
import { assembleAnswer, coinIds, notServedFresh } from "./answer.ts"
import type { DurableCell } from "../platform/durableCell/DurableCell.ts"
import { CoinGeckoClient, toRatesError } from "./CoinGeckoClient.ts"
import { MonthlyBudget } from "./credits/MonthlyBudget.ts"
import { makeCheckCurrency } from "./currencies.ts"
import { DailyHistory } from "./history/DailyHistory.ts"
import { makeHeldCharts } from "./history/heldCharts.ts"
import { makeMarketData, SERIES_DAYS } from "./marketData.ts"
import { makeRefreshPacer } from "./refreshPacer.ts"
import { RatesCache } from "./RatesCache.ts"
import { RatesConfig } from "./RatesConfig.ts"
import { type RatesAnswer, type RatesError, RatesProvider, type RatesQuery, RatesUpstreamError } from "./RatesProvider.ts"
import { makeStaleCache } from "./staleCache.ts"
import { makeResolveSymbols } from "./symbolResolution.ts"
import { chargeFor, CurrentCharge } from "./upstreamGuards.ts"
import { SecondSource } from "./fallback/SecondSource.ts"

export { ATTRIBUTION, SOURCE } from "./answer.ts"

const makeCoinGeckoRates: Effect.Effect<
  RatesProvider["Service"],
  never,
  CoinGeckoClient | MonthlyBudget | RatesCache | RatesConfig | DailyHistory | SecondSource | Scope.Scope
> = Effect.gen(function*() {
  const second = yield* SecondSource
  const config = yield* RatesConfig
  const upstream = yield* CoinGeckoClient
  const charts = makeHeldCharts(yield* DailyHistory, upstream, SERIES_DAYS)
  const cache = yield* makeStaleCache
  const checkCurrency = yield* makeCheckCurrency(upstream)
  const resolveSymbols = yield* makeResolveSymbols(upstream)
  const budget = yield* MonthlyBudget
  const market = makeMarketData(cache, upstream, charts, {
    latestTtl: Duration.seconds(config.latestTtlSeconds),
    attemptTimeout: Duration.millis(config.attemptTimeoutMs),
    pacer: makeRefreshPacer({ minIntervalMs: config.latestTtlSeconds * 1000, creditsPerMs: budget.plan.ratePerMs })
  })

  const historical = (query: RatesQuery): Effect.Effect<RatesAnswer, RatesError> =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const deadline = startedAt + config.requestBudgetMs
      const currency = query.currency.toLowerCase()
      // The lists are held in memory; only right after start-up may a request wait for their first
      // load, and for no more than a third of its budget.
      const listsDeadline = Math.min(deadline, startedAt + config.requestBudgetMs / 3)
      yield* checkCurrency(currency, listsDeadline)
      const resolved = yield* resolveSymbols(query.symbols, listsDeadline)
      const ids = coinIds(resolved)
      // With a second source, CoinGecko has two thirds of the budget: the rest is the fallback's.
      const coinGeckoDeadline = second.enabled ? startedAt + (config.requestBudgetMs * 2) / 3 : deadline
      const [latest, chartList] = yield* Effect.all([
        market.latestFor(ids, currency, coinGeckoDeadline),
        Effect.forEach(ids, (id) => Effect.result(market.chartFor(id, currency, coinGeckoDeadline)), { concurrency: "unbounded" })
      ], { concurrency: 2 })
      const charts = new Map(ids.map((id, i) => [id, chartList[i]!] as const))
      const wanted = second.enabled ? notServedFresh(resolved, latest, charts) : []
      return yield* Effect.fromResult(assembleAnswer({
        query: { ...query, currency },
        startedAt,
        resolved,
        latest,
        charts,
        second: wanted.length === 0 ? undefined : yield* second.ratesFor(wanted, currency, deadline),
        secondAttribution: second.attribution
      }))
    }).pipe(
      Effect.catchTag("CoinGeckoError", (error) =>
        // A not-found outside a chart call would mean a broken upstream contract: report it as such.
        Effect.fail(error.kind === "not-found" ? new RatesUpstreamError({ reason: error.message }) : toRatesError(error))),
      // The upstream calls this request makes are charged to its caller, and fail once in the breaker.
      Effect.provideService(CurrentCharge, chargeFor(query.caller)),
      // No stack trace: capturing one costs an Error per request, and the span's name says where it is.
      Effect.withSpan("rates.historical", { attributes: { symbols: query.symbols.length, days: query.days } }, {
        captureStackTrace: false
      })
    )

  return RatesProvider.of({ historical })
})

// ---------------------------------------------------------------------------------------------------
// Layers

/** Everything injected: swap the upstream client, the cache (Redis), the kept history or the config. */
export const layerNoDeps: Layer.Layer<RatesProvider, never, CoinGeckoClient | MonthlyBudget | RatesCache | RatesConfig | DailyHistory | SecondSource> = Layer.effect(
  RatesProvider,
  makeCoinGeckoRates
)

type ConfigError = Layer.Error<typeof RatesConfig.layer>

/** The memory cache, bounded by COINGECKO_CACHE_MAX_MB. */
const memoryCache = Layer.unwrap(
  Effect.map(RatesConfig, (config) => RatesCache.layerMemory({ maxBytes: config.cacheMaxMegabytes * 1024 * 1024 }))
)

/**
 * One instance: in-memory cache, per-minute budget and circuit breaker; the month's credits in a
 * `DurableCell`. Needs an `HttpClient`, a `DurableCell` (the server's: platform/durableCell/layer.ts)
 * a `DailyHistory` (the server's: history/history.ts; tests: history/memoryHistory.ts) and a
 * `SecondSource` (the server's: fallback/layer.ts; `SecondSource.layerNone` for CoinGecko alone).
 */
export const layer: Layer.Layer<RatesProvider, ConfigError, HttpClient.HttpClient | DurableCell | DailyHistory | SecondSource> = layerNoDeps.pipe(
  Layer.provide(Layer.mergeAll(CoinGeckoClient.layer, memoryCache)),
  Layer.provideMerge(MonthlyBudget.layer),
  Layer.provide(RatesConfig.layer)
)

/**
 * Several instances (REDIS_URL set): the cache, the coin index and currency list, the budgets (whole,
 * cold pool, callers' shares) and the circuit breaker are shared through Redis, under `keyPrefix`: what
 * one instance fetched serves the others, and all stay within one budget. Single-flight stays per
 * instance. The month's credits are in `DurableCell` (Redis or PostgreSQL: shared too). Needs
 * `Redis.Redis` (e.g. `NodeRedis.layer`), an `HttpClient` and a `DailyHistory` (with DATABASE_URL the
 * instances share it too).
 */
export const layerRedis = (keyPrefix: string): Layer.Layer<RatesProvider, ConfigError, HttpClient.HttpClient | Redis.Redis | DurableCell | DailyHistory | SecondSource> =>
  layerNoDeps.pipe(
    Layer.provide(Layer.mergeAll(CoinGeckoClient.layerRedis(keyPrefix), RatesCache.layerRedis({ prefix: `${keyPrefix}rates-cache:` }))),
    Layer.provideMerge(MonthlyBudget.layer),
    Layer.provide(RatesConfig.layer)
  )
