/**
 * The HTTP application without its capabilities' implementations: the routes derived from the
 * HttpApi, the documents, the edge, and the fast lane in front of them. `server.ts` provides live
 * services; tests provide fakes.
 */
import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./api/Api.ts"
import { Health } from "./health/Health.ts"
import { healthFastRoute } from "./health/fastRoute.ts"
import { HealthHandlers } from "./health/handlers.ts"
import { DocumentRoutes } from "./http/documents.ts"
import { makeEdge } from "./http/edge.ts"
import { fastLaneLayer } from "./http/fastLane.ts"
import { RateLimitLive } from "./http/rateLimit.ts"
import { BodyProblemsLive, CommonProblemsLive } from "./http/validation.ts"
import { NewsletterHandlers } from "./newsletter/handlers.ts"
import { OptionalBearerLive } from "./oauth/bearerMiddleware.ts"
import { OAuthHandlers } from "./oauth/handlers.ts"
import { ratesFastRoute } from "./rates/fastRoute.ts"
import { RatesHandlers } from "./rates/handlers.ts"

export const ApiRoutes = HttpApiBuilder.layer(Api).pipe(
  Layer.provide([HealthHandlers, RatesHandlers, NewsletterHandlers, OAuthHandlers]),
  // Health.layer is shared by reference with the fast lane (Layers are memoised per build).
  Layer.provide([BodyProblemsLive, CommonProblemsLive, OptionalBearerLive, RateLimitLive, Health.layer])
)

export const AppRoutes = Layer.mergeAll(ApiRoutes, DocumentRoutes, makeEdge())

/** Health and repeated rates queries straight from node:http, in front of AppRoutes (src/http/fastLane.ts). */
export const AppFastLane = fastLaneLayer(
  Effect.map(Effect.all([healthFastRoute, ratesFastRoute]), ([health, rates]) => [health, ...rates])
).pipe(Layer.provide(Health.layer))
