/**
 * The server, composed once: the HTTP application (src/app.ts) behind the edge, on a Node server,
 * with the live services read from configuration, or the services a test chooses (src/services.ts).
 * Nothing runs on import: src/main.ts launches `ServerLive()`, the tests `ServerLive({ services, port: 0 })`.
 */
// Per module, not the package index: the index loads every Node module of the platform, among them
// @redis/client (~470 modules) and ws, which this process needs only with REDIS_URL, if ever.
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, References } from "effect"
import { HttpRouter } from "effect/http"
import { Otlp } from "effect/observability"
import { AppEventStreams, appPriceHub, AppReadyAnswers, AppRoutes } from "./app.ts"
import { AppConfig } from "./config/AppConfig.ts"
import { Health } from "./health/Health.ts"
import { Edge } from "./http/edge.ts"
import { Readiness } from "./lifecycle/Readiness.ts"
import { EdgeServer, type HttpLimits } from "./http/EdgeServer.ts"
import { routerConfig } from "./http/routeTable.ts"
import { MetricsServer } from "./observability/metrics.ts"
import type { PriceHubTiming } from "./prices/PriceHub.ts"
import { RatesAnswerMemo } from "./rates/answer.ts"
import { RatesDemand } from "./rates/coingecko/latestPrices.ts"
import { type AppServiceLayers, appServices, liveServices } from "./services.ts"

const Metrics = Layer.unwrap(
  Effect.map(AppConfig, (config) =>
    config.metricsPort === undefined ? Layer.empty : MetricsServer(config.metricsPort, config.metricsHost))
)

/** OpenTelemetry over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set: request and upstream spans. */
const Telemetry = Layer.unwrap(
  Effect.map(AppConfig, (config) =>
    config.otlpEndpoint === undefined
      // Nobody would receive the spans: do not make them (a span per request costs CPU for nothing).
      ? Layer.succeed(References.TracerEnabled)(false)
      : Otlp.layerJson({
        baseUrl: config.otlpEndpoint,
        resource: { serviceName: config.serviceName, serviceVersion: config.version },
        tracerExportInterval: "2 seconds"
        // Our own collector: the plain client (the providers' identity and trace rules are upstreamHttp.ts's).
      }).pipe(Layer.provide(NodeHttpClient.layerUndici)))
)

/** The HTTP side alone: routes, documents, ready answers, the edge, on a listening server. */
const serverOn = (listen: {
  readonly port?: number | undefined
  readonly host?: string | undefined
  readonly quiet?: boolean | undefined
  readonly limits?: Partial<HttpLimits> | undefined
  readonly priceHub?: PriceHubTiming | undefined
}) => {
  // Shared by the handlers and the ready answers: one health start time, one memo of rates answers, one
  // tally of who asks which currency (the rates services provide the same layers: one instance each).
  // The price hub too: one per process, read by the edge (event streams) and the HttpApi's handler.
  const shared = Layer.mergeAll(Health.layer, RatesAnswerMemo.layer, RatesDemand.layer, appPriceHub(listen.priceHub))
  const server = Layer.unwrap(
    Effect.map(AppConfig, (config) => EdgeServer.layer({ port: listen.port ?? config.port, host: listen.host ?? config.host, limits: listen.limits }))
  ).pipe(Layer.provide(Edge.layer), Layer.provide(Layer.mergeAll(AppReadyAnswers, AppEventStreams)), Layer.provide(shared))
  return Layer.mergeAll(HttpRouter.serve(AppRoutes, { disableLogger: true, disableListenLog: listen.quiet === true, routerConfig }), Metrics).pipe(
    Layer.provideMerge(server),
    Layer.provide(shared),
    Layer.provide(Telemetry)
  )
}

/** What the HTTP application and the edge need from the services behind them. */
type AppServices = Exclude<Layer.Services<ReturnType<typeof serverOn>>, Readiness>

export interface ServerOptions {
  /** The services behind the application (src/services.ts); default `liveServices`. Tests replace some with fakes. */
  readonly services?: AppServiceLayers | undefined
  /** Listen address; default PORT/HOST of the configuration (0: an ephemeral port). */
  readonly port?: number | undefined
  readonly host?: string | undefined
  /** No "Listening on" line (tests). */
  readonly quiet?: boolean | undefined
  /** Request deadlines; C8's by default (tests shorten them). */
  readonly limits?: Partial<HttpLimits> | undefined
  /** The price hub's rounds and bounds; production's by default (tests shorten them). */
  readonly priceHub?: PriceHubTiming | undefined
}

/** The whole server: services first (keys, registries, upstream clients), then the listening socket. */
export const ServerLive = (options: ServerOptions = {}) => {
  // A service the application needs and the record does not provide fails to compile here.
  const services: Layer.Layer<AppServices, unknown, Readiness> = appServices(options.services ?? liveServices)
  // One Readiness for the probes, the draining server and the services that add checks (Redis).
  return serverOn(options).pipe(Layer.provide(services), Layer.provide(Readiness.layer))
}
