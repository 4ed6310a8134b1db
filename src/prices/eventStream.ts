/**
 * GET /api/v1/prices/stream as the edge opens it (src/http/EventStreams.ts): the decoded query to the hub, the
 * hub's refusals to the contract's problems (C10).
 */
import { Effect } from "effect"
import { addressBucket } from "../http/clientIp.ts"
import type { EventStreamAnswer, EventStreams } from "../http/EventStreams.ts"
import type { OpenRequest, Refusal } from "./hub.ts"
import { PriceHub } from "./PriceHub.ts"

/** The query as the contract decodes it (src/api/schemas.ts PricesStreamQuery). */
export interface PricesQuery {
  readonly cryptos: ReadonlyArray<string>
  readonly currency?: string | undefined
}

/** Upper-cased, de-duplicated, order kept (C4); the caller as the rates demand counts it. */
export const openRequestOf = (query: PricesQuery, clientIp: string, clientId: string | undefined): OpenRequest => {
  const bucket = addressBucket(clientIp)
  return {
    symbols: [...new Set(query.cryptos.map((s) => s.toUpperCase()))],
    currency: (query.currency ?? "usd").toLowerCase(),
    bucket,
    caller: clientId !== undefined ? `client:${clientId}` : `ip:${bucket}`
  }
}

/** A refusal's problem code and members (C7, C10). */
export const problemOf = (refusal: Refusal): Parameters<EventStreamAnswer["refuse"]> => {
  switch (refusal.code) {
    case "no_valid_symbols":
      return ["no_valid_symbols", { detail: `None of the requested symbols is known: ${refusal.unknown.join(", ")}.`, unknown: refusal.unknown }]
    case "validation_failed":
      return ["validation_failed", {
        detail: `/currency: "${refusal.currency}" is not a supported currency.`,
        errors: [{ pointer: "/currency", detail: `"${refusal.currency}" is not a supported currency` }]
      }]
    case "rate_limited":
      return ["rate_limited", { detail: "This address holds as many open price streams as it may; close one first.", retryAfter: refusal.retryAfter }]
    case "service_unavailable":
      return ["service_unavailable", { detail: refusal.detail, retryAfter: refusal.retryAfter }]
    case "upstream_error":
      return ["upstream_error", { detail: "The exchange-rate provider failed to answer correctly." }]
  }
}

export const pricesEventStreams: Effect.Effect<EventStreams["Service"], never, PriceHub> = Effect.map(Effect.service(PriceHub), (hub) => ({
  streams: [{
    operationId: "streamPrices",
    open: (request, answer) =>
      hub.open(openRequestOf(request.query as PricesQuery, request.clientIp, request.clientId), {
        refuse: (refusal) => answer.refuse(...problemOf(refusal)),
        start: answer.start
      })
  }],
  endAll: hub.endAll
}))
