/**
 * The rates capability as the HTTP layer sees it (CONTRACT C4): a query in, a complete C4 body out, with
 * how long that body stays true, or one of the errors below. The live implementation is the use case of
 * historicalRates.ts over the sources (layer.ts wires it); `layerTest` is the deterministic fake of
 * handler tests. Handlers never know which.
 */
import { Context, Data, Effect, Layer } from "effect"
import type { ExchangeRatesResponse } from "../api/schemas.ts"
import { testAnswer } from "./testRates.ts"

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

/** A source of prices or series, as the contract writes it: `coingecko` or `coinbase`. */
export type SourceName = RateSeries["sources"]["price"]

export interface RatesAnswer {
  readonly result: RatesResult
  /**
   * Until when (epoch ms) every value behind `result` stays fresh, so that asking again before then
   * gives the same result; 0 when any part is a last-good copy or a call that failed and would be
   * retried. A provider whose answers never change may say `Infinity`.
   */
  readonly freshUntil: number
  /** `result` encoded as the 200 body, when the provider already did so (answer.ts, RatesAnswerMemo); else the handler does. */
  readonly body?: Uint8Array | undefined
}

/** A source answered wrongly: 5xx, timeout, reset, unparsable or wrong-shaped body, our key rejected → 502. */
export class RatesUpstreamError extends Data.TaggedError("RatesUpstreamError")<{
  readonly reason: string
}> {}

/** No source can be asked now: rate-limited, circuit open, budget exhausted → 503 with Retry-After. */
export class RatesUnavailableError extends Data.TaggedError("RatesUnavailableError")<{
  readonly reason: string
  readonly retryAfterSeconds: number
}> {}

/** The requested `currency` is not one the source quotes → 400 validation_failed on /currency. */
export class UnsupportedCurrencyError extends Data.TaggedError("UnsupportedCurrencyError")<{
  readonly currency: string
}> {}

export type RatesError = RatesUpstreamError | RatesUnavailableError | UnsupportedCurrencyError

export class RatesProvider extends Context.Service<RatesProvider, {
  /**
   * Historical rates for the symbols. Symbols that do not resolve to a coin are listed in `unknown`;
   * an empty `rates` is not an error here (the handler turns it into 400 no_valid_symbols).
   * Parts of the result (series points) may be frozen and shared with other callers: never mutate it.
   */
  readonly historical: (query: RatesQuery) => Effect.Effect<RatesAnswer, RatesError>
}>()("app/RatesProvider") {
  /**
   * The deterministic fake of testRates.ts: BTC, ETH, SOL in usd, eur, gbp, jpy; DOWN → 502, BUSY → 503
   * (30 s), another currency → 400. Its answers never change, so they hold for ever.
   */
  static readonly layerTest: Layer.Layer<RatesProvider> = Layer.succeed(RatesProvider)({
    historical: (query) =>
      Effect.suspend((): Effect.Effect<RatesAnswer, RatesError> => {
        const answer = testAnswer(query)
        switch (answer._tag) {
          case "Down":
            return Effect.fail(new RatesUpstreamError({ reason: "test: upstream answered 500" }))
          case "Busy":
            return Effect.fail(new RatesUnavailableError({ reason: "test: upstream rate-limited us", retryAfterSeconds: 30 }))
          case "UnknownCurrency":
            return Effect.fail(new UnsupportedCurrencyError({ currency: query.currency }))
          case "Answer":
            return Effect.succeed({ result: answer.result, freshUntil: Number.POSITIVE_INFINITY })
        }
      })
  })
}
