/** Settings of the CoinGecko adapter (CONTRACT C2: COINGECKO_*); some bound the whole capability (layer.ts). */
import { Config, Context, Effect, Layer, Option, type Redacted } from "effect"
import type { ConfigInvalid } from "../../config/ConfigInvalid.ts"
import { httpUrl, int, oneOf, optional, readAll, required, secret } from "../../config/read.ts"
import type { SourceGuardConfig } from "../upstreamCall.ts"

const COINGECKO_DEMO_BASE_URL = "https://api.coingecko.com/api/v3"
const COINGECKO_PRO_BASE_URL = "https://pro-api.coingecko.com/api/v3"

/** Its guards (`SourceGuardConfig`; the request budget is the use case's too), and: */
export interface CoinGeckoConfigShape extends SourceGuardConfig {
  /** CoinGecko-compatible API root, no trailing slash. */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  /** Decides the key header: `x-cg-demo-api-key` or `x-cg-pro-api-key`. */
  readonly apiPlan: "demo" | "pro"
  /** The plan's credits a month: Demo 10,000, Basic 100,000; spent at an even pace (credits/monthlyCredits.ts). */
  readonly callsPerMonth: number
  /** Upstream calls per minute (token bucket); the demo plan allows about 30. */
  readonly callsPerMinute: number
  /** Of those, what one caller's cold fetches may spend (COINGECKO_CALLER_SHARE_PCT, 33 %); the excess is its 503. */
  readonly callerCallsPerMinute: number
  /** Of those, what cold fetches never take, kept for refreshes and the lists (COINGECKO_REFRESH_RESERVE_PCT, 20 %). */
  readonly refreshReservePerMinute: number
  /** Retry-After to report when the upstream rate-limits us without saying for how long. */
  readonly defaultRetryAfterSeconds: number
  /** Freshness of latest prices and % changes. */
  readonly latestTtlSeconds: number
  /** How long a last good copy is kept for stale-if-error answers. */
  readonly staleTtlHours: number
  /** Bound of the in-memory cache of coins' data, in MiB of JSON (least recently used out first). */
  readonly cacheMaxMegabytes: number
  /** First wait after an auxiliary list (currencies, coin index) failed to load; doubles up to an hour. */
  readonly auxiliaryRetryMs: number
  /** Pages of 250 coins by market cap read for the coin index's ranks (the top 1,000 by default). */
  readonly indexRankPages: number
  /** The calls one load of the lists makes: the currency list, the coin list, its rank pages. */
  readonly listsPerLoad: number
  /** Server processes on this host (WEB_CONCURRENCY): without the shared ledger, each spends its share of the pace. */
  readonly workers: number
}

const apiPlan = oneOf("COINGECKO_API_PLAN", ["demo", "pro"] as const, "demo")
export const readCoinGeckoConfig: Effect.Effect<CoinGeckoConfigShape, ConfigInvalid> = Effect.gen(function*() {
  // The plan decides the default host and whether a key is required: read it first, on its own.
  const plan = yield* Effect.option(apiPlan)
  const pro = Option.getOrUndefined(plan) === "pro"
  const { callerSharePercent, refreshReservePercent, ...read } = yield* readAll({
    apiPlan,
    // A pro key is refused on the demo host (CoinGecko error 10010), so the default host follows the plan.
    baseUrl: httpUrl("COINGECKO_BASE_URL").pipe(
      Config.withDefault(pro ? COINGECKO_PRO_BASE_URL : COINGECKO_DEMO_BASE_URL)
    ),
    apiKey: pro
      ? secret("COINGECKO_API_KEY").pipe(required("COINGECKO_API_KEY", "when COINGECKO_API_PLAN is pro"))
      : optional(secret("COINGECKO_API_KEY")),
    attemptTimeoutMs: int("COINGECKO_TIMEOUT_MS", 3_000, 50, 60_000),
    requestBudgetMs: int("COINGECKO_REQUEST_BUDGET_MS", 9_000, 100, 60_000),
    retries: int("COINGECKO_RETRIES", 2, 0, 5),
    retryBaseDelayMs: int("COINGECKO_RETRY_BASE_MS", 200, 0, 10_000),
    maxConcurrency: int("COINGECKO_MAX_CONCURRENCY", 4, 1, 64),
    callsPerMinute: int("COINGECKO_CALLS_PER_MIN", 30, 1, 10_000),
    // Demo's 10,000; a paid key's smallest plan (Basic) has 100,000.
    callsPerMonth: int("COINGECKO_CALLS_PER_MONTH", pro ? 100_000 : 10_000, 1_000, 1_000_000_000),
    callerSharePercent: int("COINGECKO_CALLER_SHARE_PCT", 33, 1, 100),
    refreshReservePercent: int("COINGECKO_REFRESH_RESERVE_PCT", 20, 0, 90),
    breakerFailures: int("COINGECKO_BREAKER_FAILURES", 5, 1, 1_000),
    breakerOpenMs: int("COINGECKO_BREAKER_OPEN_MS", 30_000, 100, 3_600_000),
    defaultRetryAfterSeconds: int("COINGECKO_DEFAULT_RETRY_AFTER_S", 60, 1, 3_600),
    latestTtlSeconds: int("COINGECKO_LATEST_TTL_S", 60, 1, 3_600),
    staleTtlHours: int("COINGECKO_STALE_TTL_H", 168, 1, 24 * 90),
    cacheMaxMegabytes: int("COINGECKO_CACHE_MAX_MB", 16, 1, 4_096),
    auxiliaryRetryMs: int("COINGECKO_AUX_RETRY_MS", 10_000, 100, 3_600_000),
    indexRankPages: int("COINGECKO_INDEX_RANK_PAGES", 4, 0, 40),
    workers: int("WEB_CONCURRENCY", 1, 1, 64)
  })
  return {
    ...read,
    listsPerLoad: 2 + read.indexRankPages,
    callerCallsPerMinute: Math.max(1, Math.round((read.callsPerMinute * callerSharePercent) / 100)),
    refreshReservePerMinute: Math.round((read.callsPerMinute * refreshReservePercent) / 100)
  }
})

export class CoinGeckoConfig extends Context.Service<CoinGeckoConfig, CoinGeckoConfigShape>()("app/rates/CoinGeckoConfig") {
  /** From the current `ConfigProvider`: the process environment, or a test's (test/support/config.ts). */
  static readonly layer = Layer.effect(CoinGeckoConfig, readCoinGeckoConfig)
}
