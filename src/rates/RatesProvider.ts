/**
 * The rates capability as the HTTP layer sees it: a query in, a complete C4 body out.
 * Live Layers (CoinGecko) and test Layers implement this; handlers never know which.
 */
import { Context, Data, type Effect } from "effect"

export interface RatesQuery {
  /** Upper-cased, de-duplicated, in request order; already syntactically valid. */
  readonly symbols: ReadonlyArray<string>
  /** Lower-case fiat code, e.g. "usd". */
  readonly currency: string
  /** 1..365 */
  readonly days: number
}

export interface RateSeries {
  readonly symbol: string
  readonly id: string
  readonly name: string
  readonly price: number
  readonly change: { readonly "24h": number | null; readonly "7d": number | null; readonly "30d": number | null }
  /** Daily points `[epoch ms at 00:00 UTC, price]`, oldest first. */
  readonly series: ReadonlyArray<readonly [number, number]>
}

/** The 200 body of POST /api/v1/exchange-rates (CONTRACT C4). */
export interface RatesResult {
  readonly currency: string // upper-case, e.g. "USD"
  readonly days: number
  readonly interval: "daily"
  readonly asOf: string // ISO 8601 UTC
  readonly source: string
  readonly stale: boolean
  readonly rates: ReadonlyArray<RateSeries>
  readonly unknown: ReadonlyArray<string>
  readonly attribution: string
}

/** The upstream answered wrongly: 5xx, timeout, reset, unparsable or wrong-shaped body, our key rejected → 502. */
export class RatesUpstreamError extends Data.TaggedError("RatesUpstreamError")<{
  readonly reason: string
}> {}

/** The upstream cannot be asked now: rate-limited, circuit open, budget exhausted → 503 with Retry-After. */
export class RatesUnavailableError extends Data.TaggedError("RatesUnavailableError")<{
  readonly reason: string
  readonly retryAfterSeconds: number
}> {}

/** The requested `currency` is not one the upstream quotes → 400 validation_failed on /currency. */
export class UnsupportedCurrencyError extends Data.TaggedError("UnsupportedCurrencyError")<{
  readonly currency: string
}> {}

export type RatesError = RatesUpstreamError | RatesUnavailableError | UnsupportedCurrencyError

export class RatesProvider extends Context.Service<RatesProvider, {
  /**
   * Historical rates for the symbols. Symbols that do not resolve to a coin are listed in `unknown`;
   * an empty `rates` is not an error here (the handler turns it into 400 no_valid_symbols).
   * The result may be frozen and shared with other callers (an unchanged cached answer is handed out
   * again as the same object, which lets the handler reuse its encoded body): never mutate it.
   */
  readonly historical: (query: RatesQuery) => Effect.Effect<RatesResult, RatesError>
  /**
   * Synchronously, the answer `historical` would give now when it is held in memory and everything
   * behind it is fresh (no I/O, no old copy); undefined otherwise. Lets the HTTP fast lane answer
   * a repeated query without a fiber. Optional: a provider without it is always asked `historical`.
   */
  readonly peek?: ((query: RatesQuery) => RatesResult | undefined) | undefined
}>()("app/RatesProvider") {}
