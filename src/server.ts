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
import { Readiness } from "./lifecycle/Readiness.ts"
import { EdgeServer, type HttpLimits } from "./http/EdgeServer.ts"
import { RequestCounter } from "./http/rateLimit.ts"
import { routerConfig } from "./http/routeTable.ts"
import * as Newsletters from "./newsletter/layer.ts"
import { OAuth } from "./oauth/OAuth.ts"
import { AccessLog } from "./observability/AccessLog.ts"
import { MetricsServer } from "./observability/metrics.ts"
import * as DurableCells from "./platform/durableCell/layer.ts"
import { sweepTempFiles } from "./platform/files.ts"
import * as UpstreamHttp from "./platform/upstreamHttp.ts"
import { RatesAnswerMemo } from "./rates/answer.ts"
import { RatesDemand } from "./rates/coingecko/latestPrices.ts"
import { DailyHistory } from "./rates/history/DailyHistory.ts"
import * as Rates from "./rates/layer.ts"

/**
 * Memory by default. With REDIS_URL, what all instances must share lives in Redis: rate-limit
 * counts, the token endpoint's failure counts, the rates copies, the upstream budgets and circuit breakers.
 * Durable either way: the rates history and the month's credits, in PostgreSQL with DATABASE_URL (the
 * OAuth tables' one pool), else the history in files under DATA_DIR and the credits in Redis when
 * configured, else in files under DATA_DIR/state (a restart adds no credit).
 */
const Stateful = Layer.unwrap(
  Effect.map(AppConfig, ({ redisUrl, redisKeyPrefix }) =>
    redisUrl === undefined
      ? Layer.mergeAll(
        RequestCounter.layerMemory,
        Rates.layer.pipe(Layer.provide(Layer.mergeAll(DailyHistory.layer, DurableCells.layerLocal))),
        OAuth.layer
      )
      : Layer.mergeAll(
        RequestCounter.layerRedis,
        Rates.layerRedis(redisKeyPrefix).pipe(Layer.provide(Layer.mergeAll(DailyHistory.layer, DurableCells.layerShared))),
        OAuth.layerRedis
      ).pipe(Layer.provide(Layer.unwrap(
        // Imported only when configured: the Redis client is ~500 modules, 7-20 MB of RSS.
        Effect.promise(() => import("./redis.ts")).pipe(Effect.map(({ RedisLive }) => RedisLive(redisUrl)))
      ))))
)

/** A temp file older than this under DATA_DIR is no write in progress (they take milliseconds). */
const TEMP_FILE_AGE_MS = 60_000

/**
 * Once at start-up, the temp files that interrupted writes left anywhere under DATA_DIR (state/,
 * rates-history/, oauth/, ...) are removed; never a reason not to start.
 */
const SweptDataDir = Layer.effectDiscard(
  Effect.flatMap(AppConfig, ({ dataDir }) => sweepTempFiles(dataDir, TEMP_FILE_AGE_MS)).pipe(
    Effect.flatMap((removed) =>
      removed === 0 ? Effect.void : Effect.logInfo(`start-up: removed ${removed} temporary files left under DATA_DIR by interrupted writes`)),
    Effect.catchTag("FileError", (error) => Effect.logWarning("start-up: could not sweep DATA_DIR's temporary files", error.message))
  )
)

/** Every live service the application needs, from configuration (the process environment by default). */
const LiveServices = Layer.mergeAll(Stateful, Newsletters.layer, SweptDataDir).pipe(
  Layer.provide(UpstreamHttp.layer),
  Layer.provideMerge(AccessLog.stdout),
  Layer.provideMerge(AppConfig.layer)
)


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
}) => {
  // Shared by the handlers and the ready answers: one health start time, one memo of rates answers, one
  // tally of who asks which currency (the rates services provide the same layers: one instance each).
  const shared = Layer.mergeAll(Health.layer, RatesAnswerMemo.layer, RatesDemand.layer)
  const server = Layer.unwrap(
    Effect.map(AppConfig, (config) => EdgeServer.layer({ port: listen.port ?? config.port, host: listen.host ?? config.host, limits: listen.limits }))
  ).pipe(Layer.provide(Edge.layer), Layer.provide(AppReadyAnswers), Layer.provide(shared))
  return Layer.mergeAll(HttpRouter.serve(AppRoutes, { disableLogger: true, disableListenLog: listen.quiet === true, routerConfig }), Metrics).pipe(
    Layer.provideMerge(server),
    Layer.provide(shared),
    Layer.provide(Telemetry)
  )
}

/** What the HTTP application and the edge need from the services behind them (fakes in tests). */
export type AppServices = Exclude<Layer.Services<ReturnType<typeof serverOn>>, Readiness>

export interface ServerOptions {
  /** The services behind the application; default `LiveServices`. Tests pass fakes. */
  readonly services?: Layer.Layer<AppServices, unknown> | undefined
  /** Listen address; default PORT/HOST of the configuration (0: an ephemeral port). */
  readonly port?: number | undefined
  readonly host?: string | undefined
  /** No "Listening on" line (tests). */
  readonly quiet?: boolean | undefined
  /** Request deadlines; C8's by default (tests shorten them). */
  readonly limits?: Partial<HttpLimits> | undefined
}

/** The whole server: services first (keys, registries, upstream clients), then the listening socket. */
export const ServerLive = (options: ServerOptions = {}) =>
  // One Readiness for the probes, the draining server and the services that add checks (Redis).
  serverOn(options).pipe(Layer.provide(options.services ?? LiveServices), Layer.provide(Readiness.layer))
