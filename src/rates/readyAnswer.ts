/**
 * POST /api/v1/exchange-rates as a ready answer (src/http/ReadyAnswers.ts): a query answered moments ago
 * whose answer still holds is sent from RatesAnswerMemo, without the HttpApi or the provider.
 *
 * The body is decoded with the contract's own request schema, so no request the HttpApi would refuse is
 * answered here; anything else (invalid, a miss, an answer past its freshness) is left to the HttpApi,
 * which answers it with its problems and, on success, remembers the new body (handlers.ts).
 *
 * Composition: the handler (RatesHandlers) and this ready answer must share one memo, so provide
 * `RatesAnswerMemo.layer` once, under both the HttpApi routes and the ReadyAnswers layer, e.g.
 *
 *   const Ready = Layer.effect(ReadyAnswers, Effect.all([ratesReadyAnswer, ...others]))
 *   Layer.mergeAll(ApiRoutes, Ready).pipe(Layer.provide(RatesAnswerMemo.layer))
 *
 * or `Layer.provide(RatesAnswerMemo.layer)` to each of them within one build (memoised by reference).
 */
import { Effect, Exit, Schema } from "effect"
import type { ReadyAnswer } from "../http/ReadyAnswers.ts"
import { ExchangeRatesRequest } from "../api/schemas.ts"
import { RatesAnswerMemo } from "./answerMemo.ts"
import { toRatesQuery } from "./handlers.ts"

const decodeRequest = Schema.decodeUnknownExit(ExchangeRatesRequest)

export const ratesReadyAnswer: Effect.Effect<ReadyAnswer, never, RatesAnswerMemo> = Effect.map(
  RatesAnswerMemo,
  (memo): ReadyAnswer => ({
    operationId: "getHistoricalExchangeRates",
    answer: (body) => {
      const payload = decodeRequest(body)
      return Exit.isFailure(payload) ? undefined : memo.recall(toRatesQuery(payload.value))
    }
  })
)
