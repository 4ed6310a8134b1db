/**
 * The live `RatesProvider`: CoinGecko behind a cache, single-flight and stale-if-error.
 *
 * One `historical` call runs in steps, all within `requestBudgetMs` (CONTRACT C4 answers within 10 s
 * whatever the upstream does), each in its own module:
 *   1. currencies.ts: the currency checked against `/simple/supported_vs_currencies` (cached a day);
 *   2. symbolResolution.ts: symbols → coins, the curated map then the upstream's lookup (cached a day);
 *   3. marketData.ts: per coin, the daily series (cached until the next daily point) and the latest
 *      price and changes (one batched `/coins/markets` call, cached `latestTtlSeconds`);
 *   4. answer.ts: the C4 body, and until when it holds (`freshUntil`).
 * Every cached item also has a long-lived "last good" copy (staleCache.ts). When the upstream fails,
 * that copy is served and the answer says `stale: true`; only when no copy exists does the upstream's
 * error reach the caller.
 *
 * Usage: `import * as CoinGeckoRates from "./rates/CoinGeckoRates.ts"`, then provide `CoinGeckoRates.layer`
 * (needs an `HttpClient`, e.g. `NodeHttpClient.layerUndici`), or `CoinGeckoRates.layerRedis(keyPrefix)`
 * (also needs `Redis.Redis`) when several instances run. Both read `RatesConfig` from the current
 * ConfigProvider (tests: `Layer.provide(configFrom(env))`).
 */
import { Clock, Duration, Effect, Layer, type Scope } from "effect"
import type { HttpClient } from "effect/http"
import type { Redis } from "effect/persistence"
import { assembleAnswer, coinIds } from "./answer.ts"
import { CoinGeckoClient, toRatesError } from "./CoinGeckoClient.ts"
import { makeCheckCurrency } from "./currencies.ts"
import { makeMarketData } from "./marketData.ts"
import { RatesCache } from "./RatesCache.ts"
import { RatesConfig } from "./RatesConfig.ts"
import { type RatesAnswer, type RatesError, RatesProvider, type RatesQuery, RatesUpstreamError } from "./RatesProvider.ts"
import { makeStaleCache } from "./staleCache.ts"
import { makeResolveSymbols } from "./symbolResolution.ts"

export { ATTRIBUTION, SOURCE } from "./answer.ts"
export { seriesRangeFor } from "./marketData.ts"

const makeCoinGeckoRates: Effect.Effect<
  RatesProvider["Service"],
  never,
  CoinGeckoClient | RatesCache | RatesConfig | Scope.Scope
> = Effect.gen(function*() {
  const config = yield* RatesConfig
  const upstream = yield* CoinGeckoClient
  const cache = yield* makeStaleCache
  const latestTtl = Duration.seconds(config.latestTtlSeconds)
  const checkCurrency = makeCheckCurrency(cache, upstream)
  const resolveSymbols = makeResolveSymbols(cache, upstream, { latestTtl })
  const market = makeMarketData(cache, upstream, { latestTtl })

  const historical = (query: RatesQuery): Effect.Effect<RatesAnswer, RatesError> =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const deadline = startedAt + config.requestBudgetMs
      const currency = query.currency.toLowerCase()

      // The currency list is a nicety next to the data: it may not eat more than a third of the budget.
      const currenciesUntil = yield* checkCurrency(currency, Math.min(deadline, startedAt + config.requestBudgetMs / 3))
      const resolved = yield* resolveSymbols(query.symbols, currency, deadline)
      const ids = coinIds(resolved)
      const [latest, charts] = yield* Effect.all([
        market.latestFor(ids, currency, deadline),
        Effect.forEach(ids, (id) => Effect.result(market.chartFor(id, currency, query.days, deadline)), { concurrency: "unbounded" })
      ], { concurrency: 2 })
      return yield* Effect.fromResult(assembleAnswer({
        query: { ...query, currency },
        startedAt,
        currenciesUntil,
        resolved,
        latest,
        latestTtlMs: Duration.toMillis(latestTtl),
        charts: new Map(ids.map((id, i) => [id, charts[i]!] as const))
      }))
    }).pipe(
      Effect.catchTag("CoinGeckoError", (error) =>
        // A not-found outside a chart call would mean a broken upstream contract: report it as such.
        Effect.fail(error.kind === "not-found" ? new RatesUpstreamError({ reason: error.message }) : toRatesError(error))),
      // No stack trace: capturing one costs an Error per request, and the span's name says where it is.
      Effect.withSpan("rates.historical", { attributes: { symbols: query.symbols.length, days: query.days } }, {
        captureStackTrace: false
      })
    )

  return RatesProvider.of({ historical })
})

// ---------------------------------------------------------------------------------------------------
// Layers

/** Everything injected: swap the upstream client, the cache (Redis) or the config. */
export const layerNoDeps: Layer.Layer<RatesProvider, never, CoinGeckoClient | RatesCache | RatesConfig> = Layer.effect(
  RatesProvider,
  makeCoinGeckoRates
)

type ConfigError = Layer.Error<typeof RatesConfig.layer>

/** One instance: in-memory cache, calls-per-minute budget and circuit breaker. Needs an `HttpClient`. */
export const layer: Layer.Layer<RatesProvider, ConfigError, HttpClient.HttpClient> = layerNoDeps.pipe(
  Layer.provide(Layer.mergeAll(CoinGeckoClient.layer, RatesCache.layerMemory())),
  Layer.provide(RatesConfig.layer)
)

/**
 * Several instances (REDIS_URL set): the cache, the calls-per-minute budget and the circuit breaker are
 * shared through Redis, under `keyPrefix`: what one instance fetched serves the others, and all stay
 * within one budget. Single-flight stays per instance. Needs `Redis.Redis` (e.g. `NodeRedis.layer`)
 * and an `HttpClient`.
 */
export const layerRedis = (keyPrefix: string): Layer.Layer<RatesProvider, ConfigError, HttpClient.HttpClient | Redis.Redis> =>
  layerNoDeps.pipe(
    Layer.provide(Layer.mergeAll(CoinGeckoClient.layerRedis(keyPrefix), RatesCache.layerRedis({ prefix: `${keyPrefix}rates-cache:` }))),
    Layer.provide(RatesConfig.layer)
  )
