/**
 * The HTTP application without its capabilities' implementations: the routes derived from the
 * HttpApi, the documents and the edge. `main.ts` provides live services; tests provide fakes.
 */
import { Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./api/Api.ts"
import { HealthHandlers } from "./health/handlers.ts"
import { DocumentRoutes } from "./http/documents.ts"
import { makeEdge } from "./http/edge.ts"
import { RateLimitLive } from "./http/rateLimit.ts"
import { BodyProblemsLive, CommonProblemsLive } from "./http/validation.ts"
import { NewsletterHandlers } from "./newsletter/handlers.ts"
import { OptionalBearerLive } from "./oauth/bearerMiddleware.ts"
import { OAuthHandlers } from "./oauth/handlers.ts"
import { RatesHandlers } from "./rates/handlers.ts"

export const ApiRoutes = HttpApiBuilder.layer(Api).pipe(
  Layer.provide([HealthHandlers, RatesHandlers, NewsletterHandlers, OAuthHandlers]),
  Layer.provide([BodyProblemsLive, CommonProblemsLive, OptionalBearerLive, RateLimitLive])
)

export const AppRoutes = Layer.mergeAll(ApiRoutes, DocumentRoutes, makeEdge())
