/** POST /api/v1/exchange-rates (spec §4, CONTRACT C4): the handler, and the same operation as a ready answer for the edge. */
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api, CurrentClient } from "../api/Api.ts"
import { addressBucket } from "../http/clientIp.ts"
import { exchangeOf } from "../http/exchange.ts"
import { NoValidSymbols, ServiceUnavailable, UpstreamError, ValidationFailed } from "../api/problems.ts"
import type { ExchangeRatesRequest } from "../api/schemas.ts"
import type { ReadyAnswer } from "../http/ReadyAnswers.ts"
import { encodeRatesBody, RatesAnswerMemo } from "./answer.ts"
import { RatesDemand } from "./coingecko/latestPrices.ts"
import { type RatesAnswer, RatesProvider, type RatesQuery, type RatesResult } from "./RatesProvider.ts"

const DefaultCurrency = "usd"
const DefaultDays = 30

/** Upper-cased and de-duplicated, first occurrence keeps its place (C4). */
const toRatesQuery = (payload: ExchangeRatesRequest, caller?: string): RatesQuery => ({
  symbols: [...new Set(payload.cryptos.map((s) => s.toUpperCase()))],
  currency: (payload.currency ?? DefaultCurrency).toLowerCase(),
  days: payload.days ?? DefaultDays,
  caller
})

/** `RatesQuery.caller`: the client of its token, else its address as rate limits count it (IPv6 by its /64). */
export const callerOf = (clientId: string | undefined, address: string | undefined): string | undefined =>
  clientId !== undefined ? `client:${clientId}` : address === undefined ? undefined : `ip:${addressBucket(address)}`

/** The 200 response, encoded once (not again by HttpApi); a result that does not encode is left to HttpApi to report. */
const respond = ({ body, result }: RatesAnswer): RatesResult | HttpServerResponse.HttpServerResponse => {
  const bytes = body ?? encodeRatesBody(result)
  return bytes === undefined ? result : HttpServerResponse.uint8Array(bytes, { contentType: "application/json" })
}

export const RatesHandlers = HttpApiBuilder.group(
  Api,
  "rates",
  Effect.fn(function*(handlers) {
    const rates = yield* RatesProvider
    return handlers.handle("getHistoricalExchangeRates", ({ payload, request }) =>
      Effect.flatMap(Effect.service(CurrentClient), (client) => {
      const query = toRatesQuery(payload, callerOf(client?.clientId, exchangeOf(request)?.clientIp))
      return rates.historical(query).pipe(
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
        Effect.flatMap((answer) =>
          answer.result.rates.length === 0
            ? Effect.fail(
              new NoValidSymbols({
                detail: `None of the requested symbols is known: ${answer.result.unknown.join(", ")}.`,
                unknown: answer.result.unknown
              })
            )
            : Effect.succeed(respond(answer))
        )
      )
    }))
  })
)

/**
 * The operation as a ready answer (src/http/ReadyAnswers.ts): a repeat whose answer holds, from RatesAnswerMemo (a miss goes to
 * the HttpApi), its caller noted here (RatesDemand, coingecko/latestPrices.ts). Provide `RatesAnswerMemo.layer` and `RatesDemand.layer` once per build.
 */
export const ratesReadyAnswer: Effect.Effect<ReadyAnswer, never, RatesAnswerMemo | RatesDemand> = Effect.gen(function*() {
  const memo = yield* RatesAnswerMemo
  const demand = yield* RatesDemand
  return {
    operationId: "getHistoricalExchangeRates",
    answer: (input, clientIp) => {
      const query = toRatesQuery(input as ExchangeRatesRequest)
      const body = memo.recall(query)
      if (body !== undefined) demand.note(callerOf(undefined, clientIp), query.currency)
      return body
    }
  }
})
