/**
 * POST /api/v1/exchange-rates (spec §4, CONTRACT C4) and its cacheable twin GET /api/v1/rates (C4 "Cacheable reads"):
 * the handlers, and the same operations as ready answers for the edge.
 */
import { Clock, Effect } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api, CurrentClient } from "../api/Api.ts"
import { addressBucket } from "../http/clientIp.ts"
import { exchangeOf } from "../http/exchange.ts"
import { NoValidSymbols, ServiceUnavailable, UpstreamError, ValidationFailed } from "../api/problems.ts"
import { strongEtag } from "../http/conditional.ts"
import type { CacheableBody, ReadyAnswer } from "../http/ReadyAnswers.ts"
import { encodeRatesBody, RatesAnswerMemo } from "./answer.ts"
import { cacheControlFor } from "./cacheControl.ts"
import { RatesDemand } from "./coingecko/latestPrices.ts"
import { type RatesAnswer, RatesProvider, type RatesQuery, type RatesResult } from "./RatesProvider.ts"

const DefaultCurrency = "usd"
const DefaultDays = 30

/** A query as either operation takes it: the POST's body, the GET's decoded query (C4). */
interface RatesRequest {
  readonly cryptos: ReadonlyArray<string>
  readonly currency?: string | undefined
  readonly days?: number | undefined
}

/** Upper-cased and de-duplicated, first occurrence keeps its place (C4): one query, however it is spelled. */
const toRatesQuery = (request: RatesRequest, caller?: string): RatesQuery => ({
  symbols: [...new Set(request.cryptos.map((s) => s.toUpperCase()))],
  currency: (request.currency ?? DefaultCurrency).toLowerCase(),
  days: request.days ?? DefaultDays,
  caller
})

/** `RatesQuery.caller`: the client of its token, else its address as rate limits count it (IPv6 by its /64). */
export const callerOf = (clientId: string | undefined, address: string | undefined): string | undefined =>
  clientId !== undefined ? `client:${clientId}` : address === undefined ? undefined : `ip:${addressBucket(address)}`

/** A day: how long a cache may serve an answer through an outage when the provider does not say (cacheControl.ts). */
const defaultLastGoodSeconds = 86_400

/** The 200 response, encoded once (not again by HttpApi); a result that does not encode is left to HttpApi to report. */
const respond = ({ body, result }: RatesAnswer): RatesResult | HttpServerResponse.HttpServerResponse => {
  const bytes = body ?? encodeRatesBody(result)
  return bytes === undefined ? result : HttpServerResponse.uint8Array(bytes, { contentType: "application/json" })
}

/** The GET's 200: the POST's body, with its ETag and Cache-Control (the edge answers If-None-Match with 304). */
const respondCacheable = (answer: RatesAnswer, now: number, lastGoodSeconds: number): RatesResult | HttpServerResponse.HttpServerResponse => {
  const bytes = answer.body ?? encodeRatesBody(answer.result)
  if (bytes === undefined) return answer.result
  return HttpServerResponse.uint8Array(bytes, {
    contentType: "application/json",
    headers: { etag: strongEtag(bytes), "cache-control": cacheControlFor(answer.freshUntil, now, lastGoodSeconds) }
  })
}

export const RatesHandlers = HttpApiBuilder.group(
  Api,
  "rates",
  Effect.fn(function*(handlers) {
    const rates = yield* RatesProvider
    const lastGoodSeconds = rates.lastGoodSeconds ?? defaultLastGoodSeconds
    /** Both operations: the same use case, the same refusals. */
    const answerFor = (request: RatesRequest, httpRequest: HttpServerRequest.HttpServerRequest) =>
      Effect.flatMap(Effect.service(CurrentClient), (client) => {
        const query = toRatesQuery(request, callerOf(client?.clientId, exchangeOf(httpRequest)?.clientIp))
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
              : Effect.succeed(answer)
          )
        )
      })
    return handlers
      .handle("getHistoricalExchangeRates", ({ payload, request }) => Effect.map(answerFor(payload, request), respond))
      .handle("getExchangeRates", ({ query, request }) =>
        Effect.flatMap(answerFor(query, request), (answer) =>
          Effect.map(Clock.currentTimeMillis, (now) => respondCacheable(answer, now, lastGoodSeconds))))
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
      const query = toRatesQuery(input as RatesRequest)
      const body = memo.recall(query)
      if (body !== undefined) demand.note(callerOf(undefined, clientIp), query.currency)
      return body
    }
  }
})

/** The GET as a ready answer: the same memo and demand, the body with its ETag and Cache-Control (cacheControl.ts). */
export const ratesCacheableReadyAnswer: Effect.Effect<ReadyAnswer, never, RatesAnswerMemo | RatesDemand | RatesProvider> = Effect.gen(function*() {
  const memo = yield* RatesAnswerMemo
  const demand = yield* RatesDemand
  const lastGoodSeconds = (yield* RatesProvider).lastGoodSeconds ?? defaultLastGoodSeconds
  return {
    operationId: "getExchangeRates",
    answer: (input, clientIp): CacheableBody | undefined => {
      const query = toRatesQuery(input as RatesRequest)
      const held = memo.recallHeld(query)
      if (held === undefined) return undefined
      demand.note(callerOf(undefined, clientIp), query.currency)
      return { body: held.body, etag: held.etag, cacheControl: cacheControlFor(held.freshUntil, held.at, lastGoodSeconds) }
    }
  }
})
