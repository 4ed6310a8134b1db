/**
 * Settings of Coinbase's public market data (CONTRACT C2 and C4, "Second source"): only the contract's three variables
 * are read (checked at start-up: src/checkConfiguration.ts); the rest are Coinbase's limits and our guards, fixed here.
 */
import { Config, Context, Effect, Layer, Result } from "effect"
import type { ConfigInvalid } from "../../config/ConfigInvalid.ts"
import { httpUrl, oneOf, parsed, readAll } from "../../config/read.ts"
import type { SourceGuardConfig } from "../upstreamCall.ts"

const COINBASE_EXCHANGE_BASE_URL = "https://api.exchange.coinbase.com"
const COINBASE_EXCHANGE_FEED_URL = "wss://ws-feed.exchange.coinbase.com"

const feedUrl = parsed("COINBASE_WS_URL", "an absolute ws(s) URL or none", (raw) => {
  if (raw === "none") return Result.succeed(undefined)
  const url = URL.canParse(raw) ? new URL(raw) : undefined
  return url !== undefined && (url.protocol === "ws:" || url.protocol === "wss:") ? Result.succeed(url.href) : Result.fail(undefined)
})
const RatesFallbacks = ["coinbase", "none"] as const
type RatesFallback = (typeof RatesFallbacks)[number]

/** Its guards (`SourceGuardConfig`), and: */
export interface CoinbaseConfigShape extends SourceGuardConfig {
  /** Coinbase Exchange REST root, no trailing slash. */
  readonly baseUrl: string
  /** `coinbase`: majors are answered from Coinbase when CoinGecko cannot; `none`: never asked. */
  readonly fallback: RatesFallback
  /** The public feed's URL, for live quotes; undefined (`none`): no live quotes. */
  readonly feedUrl: string | undefined
  /** A pair without a tick or heartbeat this long is down: its price comes from the REST ticker. */
  readonly pairSilenceMs: number
  /** A pair whose heartbeats name trades past its last tick read this long is down too (its ticks no longer reach us or read). */
  readonly pairBehindMs: number
  /** A connection that says nothing this long is dead (heartbeats come every second per pair). */
  readonly feedSilenceMs: number
  readonly feedOpenTimeoutMs: number
  /** First wait before reconnecting; doubles with each end in a row, up to `feedMaxRetryMs` (jittered). */
  readonly feedFirstRetryMs: number
  /** With the open timeout, under a minute: the feed is back within a minute of Coinbase's (C4), however long it was away. */
  readonly feedMaxRetryMs: number
  /** A connection that lasted this long starts the back-off over. */
  readonly feedStableMs: number
  /** Pairs followed while connected are gathered this long into one subscribe message. */
  readonly feedBatchMs: number
  /** How often an instance that does not hold the feed tells the holder every pair it follows. */
  readonly feedAnnounceMs: number
  /** Pairs followed on the feed at most: the curated majors in USD and EUR, then those asked. */
  readonly feedMaxPairs: number
  /** How long a REST ticker's price serves while the feed is down for its pair. */
  readonly restQuoteMs: number
  /** The most a request waits for REST tickers: past it, CoinGecko prices those coins (the call lands for the next). */
  readonly restQuoteWaitMs: number
  /** Calls a second: Coinbase allows 10 per address (bursts to 15); our bucket never bursts past this. */
  readonly callsPerSecond: number
  /** How long nobody calls after a 429 (Coinbase sends no Retry-After; its window is a second). */
  readonly rateLimitedCoolDownSeconds: number
  /** How often the product list is reloaded; Coinbase lists and delists pairs rarely. */
  readonly productsRefreshMs: number
  /** First wait after the product list failed to load; doubles up to an hour. */
  readonly productsRetryMs: number
}

const coinbaseDefaults: Omit<CoinbaseConfigShape, "baseUrl" | "fallback" | "feedUrl"> = {
  pairSilenceMs: 30_000,
  pairBehindMs: 30_000,
  feedSilenceMs: 10_000,
  feedOpenTimeoutMs: 10_000,
  feedFirstRetryMs: 1_000,
  feedMaxRetryMs: 30_000,
  feedStableMs: 60_000,
  feedBatchMs: 500,
  feedAnnounceMs: 5_000,
  feedMaxPairs: 150,
  restQuoteMs: 30_000,
  restQuoteWaitMs: 1_500,
  attemptTimeoutMs: 3_000,
  requestBudgetMs: 8_000,
  retries: 2,
  retryBaseDelayMs: 200,
  maxConcurrency: 4,
  callsPerSecond: 10,
  breakerFailures: 5,
  breakerOpenMs: 30_000,
  rateLimitedCoolDownSeconds: 2,
  productsRefreshMs: 3_600_000,
  productsRetryMs: 10_000
}

export const readCoinbaseConfig: Effect.Effect<CoinbaseConfigShape, ConfigInvalid> = Effect.map(
  readAll({
    baseUrl: httpUrl("COINBASE_BASE_URL").pipe(Config.withDefault(COINBASE_EXCHANGE_BASE_URL)),
    fallback: oneOf("RATES_FALLBACK", RatesFallbacks, "coinbase"),
    feedUrl: feedUrl.pipe(Config.withDefault(COINBASE_EXCHANGE_FEED_URL))
  }),
  (read) => ({ ...coinbaseDefaults, ...read })
)

export class CoinbaseConfig extends Context.Service<CoinbaseConfig, CoinbaseConfigShape>()("app/CoinbaseConfig") {
  /** From the current `ConfigProvider`: the process environment, or a test's (test/support/config.ts). */
  static readonly layer = Layer.effect(CoinbaseConfig, readCoinbaseConfig)

  /** The variables as read, with some guards replaced (tests: short timeouts, a quick breaker). */
  static readonly layerWith = (overrides: Partial<CoinbaseConfigShape>) =>
    Layer.effect(CoinbaseConfig, Effect.map(readCoinbaseConfig, (read) => ({ ...read, ...overrides })))
}
