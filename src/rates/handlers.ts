/** POST /api/v1/exchange-rates (spec §4, CONTRACT C4): normalise the query, map domain errors to problems. */
import { Effect, Exit, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NoValidSymbols, ServiceUnavailable, UpstreamError, ValidationFailed } from "../api/problems.ts"
import { type ExchangeRatesRequest, ExchangeRatesResponse } from "../api/schemas.ts"
import { RatesProvider, type RatesQuery, type RatesResult } from "./RatesProvider.ts"

export const DefaultCurrency = "usd"
export const DefaultDays = 30

/** Upper-cased and de-duplicated, first occurrence keeps its place (C4). */
export const toRatesQuery = (payload: ExchangeRatesRequest): RatesQuery => ({
  symbols: [...new Set(payload.cryptos.map((s) => s.toUpperCase()))],
  currency: (payload.currency ?? DefaultCurrency).toLowerCase(),
  days: payload.days ?? DefaultDays
})

const encodeResponse = Schema.encodeUnknownExit(ExchangeRatesResponse)
const utf8 = new TextEncoder()

/** Encoded bodies of frozen results: the provider hands back the same frozen object for an unchanged answer. */
const encodedBodies = new WeakMap<RatesResult, Uint8Array>()

/**
 * The 200 body exactly as HttpApi would encode it (the `ExchangeRatesResponse` encoding, then
 * `JSON.stringify`), or undefined when the result does not encode (left to HttpApi to report).
 * Remembered per result object when the result is frozen, so a cached answer is validated and
 * serialised once, not on every request.
 */
export const encodeRatesBody = (result: RatesResult): Uint8Array | undefined => {
  const known = encodedBodies.get(result)
  if (known !== undefined) return known
  const encoded = encodeResponse(result)
  if (Exit.isFailure(encoded)) return undefined
  const body = utf8.encode(JSON.stringify(encoded.value))
  if (Object.isFrozen(result)) encodedBodies.set(result, body)
  return body
}

/** The 200 response, skipping HttpApi's per-request encoding when the body is known. */
const respond = (result: RatesResult): RatesResult | HttpServerResponse.HttpServerResponse => {
  const body = encodeRatesBody(result)
  return body === undefined ? result : HttpServerResponse.uint8Array(body, { contentType: "application/json" })
}

export const RatesHandlers = HttpApiBuilder.group(
  Api,
  "rates",
  Effect.fn(function*(handlers) {
    const rates = yield* RatesProvider
    return handlers.handle("getHistoricalExchangeRates", ({ payload }) =>
      rates.historical(toRatesQuery(payload)).pipe(
        Effect.catchTags({
          RatesUpstreamError: () => Effect.fail(new UpstreamError({ detail: "The exchange-rate provider failed to answer correctly." })),
          RatesUnavailableError: (e) =>
            Effect.fail(
              new ServiceUnavailable({
                detail: "The exchange-rate provider is temporarily unavailable.",
                retryAfter: Math.max(1, Math.ceil(e.retryAfterSeconds))
              })
            ),
          UnsupportedCurrencyError: (e) =>
            Effect.fail(
              new ValidationFailed({
                detail: `/currency: "${e.currency}" is not a supported currency.`,
                errors: [{ pointer: "/currency", detail: `"${e.currency}" is not a supported currency` }]
              })
            )
        }),
        Effect.flatMap((result) =>
          result.rates.length === 0
            ? Effect.fail(
              new NoValidSymbols({
                detail: `None of the requested symbols is known: ${result.unknown.join(", ")}.`,
                unknown: result.unknown
              })
            )
            : Effect.succeed(respond(result))
        )
      ))
  })
)
