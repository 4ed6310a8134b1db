/**
 * The server, composed once: the HTTP application (src/app.ts) behind the edge, on a Node server,
 * with the live services read from configuration, or the services a test chooses. Nothing runs on
 * import: src/main.ts launches `ServerLive()`, the tests `ServerLive({ services, port: 0 })`.
 */
// Per module, not the package index: the index loads every Node module of the platform, among them
// @redis/client (~470 modules) and ws, which this process needs only with REDIS_URL, if ever.
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, References } from "effect"
import { HttpRouter } from "effect/http"
import { Otlp } from "effect/observability"
import { AppReadyAnswers, AppRoutes } from "./app.ts"
import { AppConfig } from "./config/AppConfig.ts"
import { Health } from "./health/Health.ts"
import { Edge } from "./http/edge.ts"
import { EdgeServer } from "./http/EdgeServer.ts"
import { RequestCounter } from "./http/rateLimit.ts"
import { routerConfig } from "./http/routeTable.ts"
import { NewsletterLayer } from "./newsletter/layer.ts"
import { OAuthLive } from "./oauth/layers.ts"
import { AccessLog } from "./observability/AccessLog.ts"
import { MetricsServer } from "./observability/metrics.ts"
import { RatesAnswerMemo } from "./rates/answerMemo.ts"
import * as CoinGeckoRates from "./rates/CoinGeckoRates.ts"

/**
 * Memory by default. With REDIS_URL, what all instances must share lives in Redis: rate-limit
 * counts, the rates cache, the upstream call budget and circuit breaker.
 */
const Stateful = Layer.unwrap(
  Effect.map(AppConfig, ({ redisUrl, redisKeyPrefix }) =>
    redisUrl === undefined
      ? Layer.mergeAll(RequestCounter.layerMemory, CoinGeckoRates.layer)
      : Layer.mergeAll(RequestCounter.layerRedis, CoinGeckoRates.layerRedis(redisKeyPrefix)).pipe(Layer.provide(Layer.unwrap(
        // Imported only when configured: the Redis client is ~500 modules, 7-20 MB of RSS.
        Effect.promise(() => import("./redis.ts")).pipe(Effect.map(({ RedisLive }) => RedisLive(redisUrl)))
      ))))
)

/** Every live service the application needs, from configuration (the process environment by default). */
export const LiveServices = Layer.mergeAll(Stateful, NewsletterLayer).pipe(
  Layer.provide(NodeHttpClient.layerUndici),
  Layer.provideMerge(Layer.mergeAll(OAuthLive, AccessLog.stdout)),
  Layer.provideMerge(AppConfig.layer)
)

/** What the HTTP application and the edge need from the services behind them. */
export type AppServices = Layer.Success<typeof LiveServices>

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
        resource: { serviceName: config.serviceName, serviceVersion: "1.0.0" },
        tracerExportInterval: "2 seconds"
      }).pipe(Layer.provide(NodeHttpClient.layerUndici)))
)

export interface ServerOptions {
  /** The services behind the application; default `LiveServices`. Tests pass fakes. */
  readonly services?: Layer.Layer<AppServices, unknown> | undefined
  /** Listen address; default PORT/HOST of the configuration (0: an ephemeral port). */
  readonly port?: number | undefined
  readonly host?: string | undefined
}

/** The whole server: services first (keys, registries, upstream clients), then the listening socket. */
export const ServerLive = (options: ServerOptions = {}) => {
  const services = options.services ?? LiveServices
  // Shared by the handlers and the ready answers: one health start time, one memo of rates answers.
  const shared = Layer.mergeAll(Health.layer, RatesAnswerMemo.layer).pipe(Layer.provideMerge(services))
  const server = Layer.unwrap(
    Effect.map(AppConfig, (config) =>
      EdgeServer.layer({ port: options.port ?? config.port, host: options.host ?? config.host }))
  ).pipe(Layer.provide(Edge.layer), Layer.provide(AppReadyAnswers), Layer.provide(shared))
  return Layer.mergeAll(HttpRouter.serve(AppRoutes, { disableLogger: true, disableListenLog: true, routerConfig }), Metrics).pipe(
    Layer.provideMerge(server),
    Layer.provide(shared),
    Layer.provide(Telemetry),
    Layer.provide(services)
  )
}
