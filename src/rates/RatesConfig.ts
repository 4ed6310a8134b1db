/**
 * Settings of the CoinGecko rates upstream (CONTRACT C2) and the knobs of our upstream economy.
 * Read with the shared `EnvReader`, so every bad variable is reported by name at start-up.
 */
import { Context, Effect, Layer, type Redacted } from "effect"
import { type ConfigInvalid, type Env, EnvReader } from "../env.ts"

export const COINGECKO_DEMO_BASE_URL = "https://api.coingecko.com/api/v3"
export const COINGECKO_PRO_BASE_URL = "https://pro-api.coingecko.com/api/v3"

export interface RatesConfigShape {
  /** CoinGecko-compatible API root, no trailing slash. */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  /** Decides the key header: `x-cg-demo-api-key` or `x-cg-pro-api-key`. */
  readonly apiPlan: "demo" | "pro"
  /** Time allowed for one upstream HTTP attempt (headers and body). */
  readonly attemptTimeoutMs: number
  /** Wall-clock budget for one `historical` call, retries included; past it we answer from cache or fail. */
  readonly requestBudgetMs: number
  /** Extra attempts after a transient failure (5xx, timeout, connection reset). */
  readonly retries: number
  /** First backoff delay; doubles per retry. */
  readonly retryBaseDelayMs: number
  /** Upstream calls in flight at once. */
  readonly maxConcurrency: number
  /** Upstream calls per minute (token bucket); the demo plan allows about 30. */
  readonly callsPerMinute: number
  /** Consecutive upstream failures that open the circuit. */
  readonly breakerFailures: number
  /** How long an open circuit refuses calls before letting one probe through. */
  readonly breakerOpenMs: number
  /** Retry-After to report when the upstream rate-limits us without saying for how long. */
  readonly defaultRetryAfterSeconds: number
  /** Freshness of latest prices and % changes. */
  readonly latestTtlSeconds: number
  /** How long a last good copy is kept for stale-if-error answers. */
  readonly staleTtlHours: number
}

export const readRatesConfig = (env: Env): Effect.Effect<RatesConfigShape, ConfigInvalid> => {
  const r = new EnvReader(env)
  const apiPlan = r.oneOf("COINGECKO_API_PLAN", ["demo", "pro"] as const, "demo")
  const apiKey = r.secret("COINGECKO_API_KEY")
  // A pro key is refused on the demo host (CoinGecko error 10010), so the default host follows the plan.
  const baseUrl = r.url("COINGECKO_BASE_URL", apiPlan === "pro" ? COINGECKO_PRO_BASE_URL : COINGECKO_DEMO_BASE_URL)
  if (apiPlan === "pro") r.require("COINGECKO_API_KEY", "when COINGECKO_API_PLAN is pro")
  const attemptTimeoutMs = r.int("COINGECKO_TIMEOUT_MS", 3_000, 50, 60_000)
  const requestBudgetMs = r.int("COINGECKO_REQUEST_BUDGET_MS", 9_000, 100, 60_000)
  return r.done({
    baseUrl,
    apiKey,
    apiPlan,
    attemptTimeoutMs,
    requestBudgetMs,
    retries: r.int("COINGECKO_RETRIES", 2, 0, 5),
    retryBaseDelayMs: r.int("COINGECKO_RETRY_BASE_MS", 200, 0, 10_000),
    maxConcurrency: r.int("COINGECKO_MAX_CONCURRENCY", 4, 1, 64),
    callsPerMinute: r.int("COINGECKO_CALLS_PER_MIN", 30, 1, 10_000),
    breakerFailures: r.int("COINGECKO_BREAKER_FAILURES", 5, 1, 1_000),
    breakerOpenMs: r.int("COINGECKO_BREAKER_OPEN_MS", 30_000, 100, 3_600_000),
    defaultRetryAfterSeconds: r.int("COINGECKO_DEFAULT_RETRY_AFTER_S", 60, 1, 3_600),
    latestTtlSeconds: r.int("COINGECKO_LATEST_TTL_S", 60, 1, 3_600),
    staleTtlHours: r.int("COINGECKO_STALE_TTL_H", 168, 1, 24 * 90)
  })
}

export class RatesConfig extends Context.Service<RatesConfig, RatesConfigShape>()("app/RatesConfig") {
  static readonly layer = Layer.effect(RatesConfig, Effect.suspend(() => readRatesConfig(process.env)))
  /** For tests: configuration from an explicit environment, never the process's. */
  static readonly layerFrom = (env: Env) => Layer.effect(RatesConfig, readRatesConfig(env))
}
