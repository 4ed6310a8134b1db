/** POST /api/v1/exchange-rates (spec §4, CONTRACT C4): normalise the query, map domain errors to problems. */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NoValidSymbols, ServiceUnavailable, UpstreamError, ValidationFailed } from "../api/problems.ts"
import type { ExchangeRatesRequest } from "../api/schemas.ts"
import { RatesProvider, type RatesQuery } from "./RatesProvider.ts"

export const DefaultCurrency = "usd"
export const DefaultDays = 30

/** Upper-cased and de-duplicated, first occurrence keeps its place (C4). */
export const toRatesQuery = (payload: ExchangeRatesRequest): RatesQuery => ({
  symbols: [...new Set(payload.cryptos.map((s) => s.toUpperCase()))],
  currency: (payload.currency ?? DefaultCurrency).toLowerCase(),
  days: payload.days ?? DefaultDays
})

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
            : Effect.succeed(result)
        )
      ))
  })
)
