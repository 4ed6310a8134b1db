/**
 * POST /api/v1/exchange-rates as a ready answer (src/http/ReadyAnswers.ts): a query answered moments ago
 * whose answer still holds is sent from RatesAnswerMemo, without the HttpApi or the provider.
 *
 * The edge hands it the body decoded with the contract's own request schema (routeTable.ts), so no
 * request the HttpApi would refuse is answered here; a miss or an answer past its freshness is left to
 * the HttpApi, which on success remembers the new body (handlers.ts).
 *
 * Composition: the handler (RatesHandlers) and this ready answer must share one memo, so provide
 * `RatesAnswerMemo.layer` once, under both the HttpApi routes and the ReadyAnswers layer, e.g.
 *
 *   const Ready = Layer.effect(ReadyAnswers, Effect.all([ratesReadyAnswer, ...others]))
 *   Layer.mergeAll(ApiRoutes, Ready).pipe(Layer.provide(RatesAnswerMemo.layer))
 *
 * or `Layer.provide(RatesAnswerMemo.layer)` to each of them within one build (memoised by reference).
 */
import { Effect } from "effect"
import type { ReadyAnswer } from "../http/ReadyAnswers.ts"
import type { ExchangeRatesRequest } from "../api/schemas.ts"
import { RatesAnswerMemo } from "./answerMemo.ts"
import { toRatesQuery } from "./handlers.ts"

export const ratesReadyAnswer: Effect.Effect<ReadyAnswer, never, RatesAnswerMemo> = Effect.map(
  RatesAnswerMemo,
  (memo): ReadyAnswer => ({
    operationId: "getHistoricalExchangeRates",
    answer: (payload) => memo.recall(toRatesQuery(payload as ExchangeRatesRequest))
  })
)
