/**
 * POST /api/v1/exchange-rates on the fast lane: a query whose answer the provider holds, fresh, in
 * memory (`RatesProvider.peek`). The body is decoded with the contract's own request schema, so the
 * lane accepts no request the HttpApi would refuse; anything else (malformed, invalid, a miss) is
 * handed to the HttpApi path, which answers it with its problems.
 */
import { Effect, Exit, Schema } from "effect"
import { ExchangeRatesRequest } from "../api/schemas.ts"
import type { FastRoute } from "../http/fastLane.ts"
import { encodeRatesBody, toRatesQuery } from "./handlers.ts"
import { RatesProvider } from "./RatesProvider.ts"

const decodeRequest = Schema.decodeUnknownExit(ExchangeRatesRequest)

/** Bodies of a few symbols are small; a larger one is a rarer query, left to the HttpApi path. */
const MaxFastBody = 4096

export const ratesFastRoute: Effect.Effect<ReadonlyArray<FastRoute>, never, RatesProvider> = Effect.map(
  RatesProvider,
  ({ peek }) =>
    peek === undefined ? [] : [{
      path: "/api/v1/exchange-rates",
      methods: ["POST"],
      policy: "rates",
      maxBody: MaxFastBody,
      answer: (body) => {
        let json: unknown
        try {
          json = JSON.parse(body!.toString("utf8"))
        } catch {
          return undefined
        }
        const payload = decodeRequest(json)
        if (Exit.isFailure(payload)) return undefined
        const result = peek(toRatesQuery(payload.value))
        return result === undefined ? undefined : encodeRatesBody(result)
      }
    }]
)
