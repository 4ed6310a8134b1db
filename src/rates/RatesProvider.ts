/**
 * The rates capability as the HTTP layer sees it: a query in, a complete C4 body out, with how long
 * that body stays true. Live Layers (CoinGecko) and the fake implement this; handlers never know which.
 */
import { Context, type Effect, Layer } from "effect"
import type { ExchangeRatesResponse } from "../api/schemas.ts"
import type { RatesError } from "./errors.ts"
import { testRates } from "./RatesProviderTest.ts"

export { type RatesError, RatesUnavailableError, RatesUpstreamError, UnsupportedCurrencyError } from "./errors.ts"

export interface RatesQuery {
  /** Upper-cased, de-duplicated, in request order; already syntactically valid. */
  readonly symbols: ReadonlyArray<string>
  /** Lower-case fiat code, e.g. "usd". */
  readonly currency: string
  /** 1..365 */
  readonly days: number
  /**
   * Whom the upstream calls this query causes are charged to (its share of the budget, C4): `ip:<address>`
   * (IPv6 by /64) or `client:<id>` with a token. Undefined: no one's share (internal callers, tests).
   * Not part of the answer: queries differing only by caller have the same answer.
   */
  readonly caller?: string | undefined
}

/** The 200 body of POST /api/v1/exchange-rates (CONTRACT C4), as the contract states it. */
export type RatesResult = typeof ExchangeRatesResponse.Type

/** One coin of the answer: price, changes and daily points `[epoch ms at 00:00 UTC, price]`, oldest first. */
export type RateSeries = RatesResult["rates"][number]

export interface RatesAnswer {
  readonly result: RatesResult
  /**
   * Until when (epoch ms) every value behind `result` stays fresh, so that asking again before then
   * gives the same result; 0 when any part is a last-good copy or a call that failed and would be
   * retried. A provider whose answers never change may say `Infinity`.
   */
  readonly freshUntil: number
}

export class RatesProvider extends Context.Service<RatesProvider, {
  /**
   * Historical rates for the symbols. Symbols that do not resolve to a coin are listed in `unknown`;
   * an empty `rates` is not an error here (the handler turns it into 400 no_valid_symbols).
   * Parts of the result (series points) may be frozen and shared with other callers: never mutate it.
   */
  readonly historical: (query: RatesQuery) => Effect.Effect<RatesAnswer, RatesError>
}>()("app/RatesProvider") {
  /** The deterministic fake of RatesProviderTest.ts: BTC, ETH, SOL; DOWN → 502, BUSY → 503 (handler tests). */
  static readonly layerTest: Layer.Layer<RatesProvider> = Layer.succeed(RatesProvider)(testRates)
}
