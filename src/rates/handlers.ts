/**
 * POST /api/v1/exchange-rates (spec §4, CONTRACT C4): normalise the query, map domain errors to problems,
 * and remember the encoded 200 body while it holds (RatesAnswerMemo), for the edge to answer a repeat.
 */
import { Clock, Effect, Exit, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api, CurrentClient } from "../api/Api.ts"
import { addressBucket } from "../http/clientIp.ts"
import { exchangeOf } from "../http/exchange.ts"
import { NoValidSymbols, ServiceUnavailable, UpstreamError, ValidationFailed } from "../api/problems.ts"
import { type ExchangeRatesRequest, ExchangeRatesResponse } from "../api/schemas.ts"
import { RatesAnswerMemo } from "./answerMemo.ts"
import { type RatesAnswer, RatesProvider, type RatesQuery, type RatesResult } from "./RatesProvider.ts"

export const DefaultCurrency = "usd"
export const DefaultDays = 30

/** Upper-cased and de-duplicated, first occurrence keeps its place (C4). */
export const toRatesQuery = (payload: ExchangeRatesRequest, caller?: string): RatesQuery => ({
  symbols: [...new Set(payload.cryptos.map((s) => s.toUpperCase()))],
  currency: (payload.currency ?? DefaultCurrency).toLowerCase(),
  days: payload.days ?? DefaultDays,
  caller
})

/**
 * Whom a request's upstream calls are charged to (`RatesQuery.caller`): the client of its token, else
 * its address, counted as rate limits count it (IPv6 by its /64, which one subscriber usually holds).
 */
export const callerOf = (clientId: string | undefined, address: string | undefined): string | undefined =>
  clientId !== undefined ? `client:${clientId}` : address === undefined ? undefined : `ip:${addressBucket(address)}`

const encodeResponse = Schema.encodeUnknownExit(ExchangeRatesResponse)
const utf8 = new TextEncoder()

/**
 * The 200 body exactly as HttpApi would encode it (the `ExchangeRatesResponse` encoding, then
 * `JSON.stringify`), or undefined when the result does not encode (left to HttpApi to report).
 */
export const encodeRatesBody = (result: RatesResult): Uint8Array | undefined => {
  const encoded = encodeResponse(result)
  return Exit.isFailure(encoded) ? undefined : utf8.encode(JSON.stringify(encoded.value))
}

export const RatesHandlers = HttpApiBuilder.group(
  Api,
  "rates",
  Effect.fn(function*(handlers) {
    const rates = yield* RatesProvider
    const memo = yield* RatesAnswerMemo

    /** The 200 response, encoded once here (and remembered while it holds), not again by HttpApi. */
    const respond = (query: RatesQuery, { freshUntil, result }: RatesAnswer) =>
      Effect.map(Clock.currentTimeMillis, (now): RatesResult | HttpServerResponse.HttpServerResponse => {
        const body = encodeRatesBody(result)
        if (body === undefined) return result
        if (freshUntil > now) memo.remember(query, body, freshUntil)
        return HttpServerResponse.uint8Array(body, { contentType: "application/json" })
      })

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
            : respond(query, answer)
        )
      )
    }))
  })
)
