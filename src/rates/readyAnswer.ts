/**
 * POST /api/v1/exchange-rates as a ready answer (src/http/ReadyAnswers.ts): a query answered moments ago
 * whose answer still holds is sent from RatesAnswerMemo, without the HttpApi or the provider.
 *
 * The edge hands it the body decoded with the contract's own request schema (routeTable.ts), so no
 * request the HttpApi would refuse is answered here; a miss or an answer past its freshness is left to
 * the HttpApi, which on success remembers the new body (handlers.ts).
 *
 * A repeat answered here never reaches the use case, so its caller is noted here (RatesDemand: the
 * refresh budget goes by callers, demand.ts); a miss is noted by the use case. Ready answers serve
 * anonymous requests only: the caller is the address's, as the handler counts it (handlers.ts `callerOf`).
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
import { Effect } from "effect"
import type { ReadyAnswer } from "../http/ReadyAnswers.ts"
import type { ExchangeRatesRequest } from "../api/schemas.ts"
import { RatesAnswerMemo } from "./answerMemo.ts"
import { RatesDemand } from "./demand.ts"
import { callerOf, toRatesQuery } from "./handlers.ts"

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
