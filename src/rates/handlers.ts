/**
 * POST /api/v1/exchange-rates (spec §4, CONTRACT C4): normalise the query, call the rates capability,
 * map its errors to problems, and send the 200 body as the capability encoded it (RatesAnswerMemo in answer.ts, which
 * remembers it for the edge to answer a repeat) or encode it here; and the same operation as a ready answer
 * for the edge (`ratesReadyAnswer`, below).
 */
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

/**
 * Whom a request's upstream calls are charged to (`RatesQuery.caller`): the client of its token, else
 * its address, counted as rate limits count it (IPv6 by its /64, which one subscriber usually holds).
 */
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
 * POST /api/v1/exchange-rates as a ready answer (src/http/ReadyAnswers.ts): a query answered moments ago
 * whose answer still holds is sent from RatesAnswerMemo, without the HttpApi or the provider.
 *
 * The edge hands it the body decoded with the contract's own request schema (routeTable.ts), so no
 * request the HttpApi would refuse is answered here; a miss or an answer past its freshness is left to
 * the HttpApi, which on success remembers the new body (above).
 *
 * A repeat answered here never reaches the use case, so its caller is noted here (RatesDemand: the
 * refresh budget goes by callers, demand.ts); a miss is noted by the use case. Ready answers serve
 * anonymous requests only: the caller is the address's, as the handler counts it (`callerOf`).
 *
 * Composition: the handler (RatesHandlers) and this ready answer must share one memo and one demand, so
 * provide `RatesAnswerMemo.layer` and `RatesDemand.layer` once, under both the HttpApi routes and the
 * ReadyAnswers layer, e.g.
 *
 *   const Ready = Layer.effect(ReadyAnswers, Effect.all([ratesReadyAnswer, ...others]))
 *   Layer.mergeAll(ApiRoutes, Ready).pipe(Layer.provide(Layer.merge(RatesAnswerMemo.layer, RatesDemand.layer)))
 *
 * or provide those layers to each of them within one build (memoised by reference).
 */

export const ratesReadyAnswer: Effect.Effect<ReadyAnswer, never, RatesAnswerMemo | RatesDemand> = Effect.gen(function*() {
  const memo = yield* RatesAnswerMemo
  const demand = yield* RatesDemand
  return {
    operationId: "getHistoricalExchangeRates",
    answer: (payload, clientIp) => {
      const query = toRatesQuery(payload as ExchangeRatesRequest)
      const body = memo.recall(query)
      if (body !== undefined) demand.note(callerOf(undefined, clientIp), query.currency)
      return body
    }
  }
})
