/** The rates capability as the HTTP layer sees it (CONTRACT C4). Live: historicalRates.ts (wired in layer.ts); `layerTest`: a fake. */
import { Context, Data, Effect, Layer } from "effect"
import type { ExchangeRatesResponse } from "../api/schemas.ts"
import { TEST_AS_OF, testAnswer } from "./testRates.ts"

export interface RatesQuery {
  /** Upper-cased, de-duplicated, in request order; already syntactically valid. */
  readonly symbols: ReadonlyArray<string>
  /** Lower-case fiat code, e.g. "usd". */
  readonly currency: string
  /** 1..365 */
  readonly days: number
  /** Who is charged for its upstream calls (C4): `ip:<address>` or `client:<id>`; undefined: no one. Not part of the answer. */
  readonly caller?: string | undefined
}

export type RatesResult = typeof ExchangeRatesResponse.Type

/** One coin of the answer: price, changes and daily points `[epoch ms at 00:00 UTC, price]`, oldest first. */
export type RateSeries = RatesResult["rates"][number]
export type SourceName = RateSeries["sources"]["price"]

export interface RatesAnswer {
  readonly result: RatesResult
  /** Until when (epoch ms) asking again gives the same result; 0 when any part is a last-good copy or a failed call. */
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

/** A price held now (C10): as the live source or the first source last gave it, `at` when it was observed (epoch ms). */
export interface HeldPrice {
  readonly price: number
  readonly change24h: number | null
  readonly at: number
  readonly source: SourceName
}

export interface HeldPricesQuery {
  /** Upper-cased, de-duplicated, in request order. */
  readonly symbols: ReadonlyArray<string>
  /** Lower-case fiat code. */
  readonly currency: string
  /** Noted once in the demand (RatesDemand) when given: a stream's opening, as a rate request (C10). */
  readonly caller?: string | undefined
}

export interface HeldPrices {
  /** Per symbol held now; a known symbol without a price held yet is absent. */
  readonly prices: ReadonlyMap<string, HeldPrice>
  readonly unknown: ReadonlyArray<string>
}

export class RatesProvider extends Context.Service<RatesProvider, {
  /** Unknown symbols go to `unknown` (no rates: the handler's 400). Parts may be frozen and shared: never mutate the result. */
  readonly historical: (query: RatesQuery) => Effect.Effect<RatesAnswer, RatesError>
  /**
   * How long it serves last-good copies when its sources fail (seconds): how long a cache may serve an
   * answer through an outage (stale-if-error, cacheControl.ts). Undefined: a day.
   */
  readonly lastGoodSeconds?: number | undefined
  /**
   * The latest prices held now (C10: the price stream reads them every round): live quotes first, then the first source's
   * copies, which its refresh pacer renews; never the daily points. Fails only as `historical` does on its step 1.
   */
  readonly latestPrices: (query: HeldPricesQuery) => Effect.Effect<HeldPrices, RatesError>
}>()("app/RatesProvider") {
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
      }),
    latestPrices: (query) =>
      Effect.suspend((): Effect.Effect<HeldPrices, RatesError> => {
        const answer = testAnswer({ ...query, days: 1 })
        if (answer._tag === "UnknownCurrency") return Effect.fail(new UnsupportedCurrencyError({ currency: query.currency }))
        if (answer._tag !== "Answer") return Effect.fail(new RatesUpstreamError({ reason: "test: upstream answered 500" }))
        const at = Date.parse(TEST_AS_OF)
        const prices = new Map(answer.result.rates.map((rate) => [rate.symbol, { price: rate.price, change24h: rate.change["24h"], at, source: rate.sources.price }] as const))
        return Effect.succeed({ prices, unknown: answer.result.unknown })
      })
  })
}
