/**
 * The HTTP application without its services: the routes derived from the HttpApi, the documents,
 * the HttpApi side of the edge, and the ready answers the capabilities contribute to the edge.
 * `server.ts` puts it behind the edge with live services or a test's.
 */
import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./api/Api.ts"
import { HealthHandlers } from "./health/handlers.ts"
import { healthReadyAnswer } from "./health/readyAnswer.ts"
import { ApiErrors } from "./http/apiErrors.ts"
import { DocumentRoutes } from "./http/documents.ts"
import { ReadyAnswers } from "./http/ReadyAnswers.ts"
import { BodyProblemsLive } from "./http/validation.ts"
import { NewsletterHandlers } from "./newsletter/handlers.ts"
import { OptionalBearerLive } from "./oauth/bearerMiddleware.ts"
import { OAuthHandlers } from "./oauth/handlers.ts"
import { EventStreams } from "./http/EventStreams.ts"
import { pricesEventStreams } from "./prices/eventStream.ts"
import { PricesHandlers } from "./prices/handlers.ts"
import { WidgetHandlers } from "./prices/widget/handlers.ts"
import { PriceHub, type PriceHubTiming } from "./prices/PriceHub.ts"
import { PriceSource } from "./prices/PriceSource.ts"
import { RatesProvider } from "./rates/RatesProvider.ts"
import { RatesHandlers, ratesCacheableReadyAnswer, ratesReadyAnswer } from "./rates/handlers.ts"

const ApiRoutes = HttpApiBuilder.layer(Api).pipe(
  Layer.provide([HealthHandlers, RatesHandlers, PricesHandlers, NewsletterHandlers, OAuthHandlers, WidgetHandlers]),
  Layer.provide([BodyProblemsLive, OptionalBearerLive])
)

export const AppRoutes = Layer.mergeAll(ApiRoutes, DocumentRoutes, ApiErrors)

/** Answers the capabilities hold in memory, which the edge serves before the HttpApi. */
export const AppReadyAnswers = Layer.effect(ReadyAnswers, Effect.all([healthReadyAnswer, ratesReadyAnswer, ratesCacheableReadyAnswer]))

/** The event streams the capabilities answer, which the edge opens (the price stream, C10). */
export const AppEventStreams = Layer.effect(EventStreams, pricesEventStreams)

/**
 * The process's one price hub, reading what the rates capability holds (its port answered here, where both are in reach);
 * its production rounds and bounds unless a test gives smaller ones.
 */
export const appPriceHub = (timing: PriceHubTiming = {}) =>
  PriceHub.layerWith(timing).pipe(
    Layer.provide(Layer.effect(PriceSource, Effect.map(Effect.service(RatesProvider), (rates) => PriceSource.of({ latest: rates.latestPrices }))))
  )
