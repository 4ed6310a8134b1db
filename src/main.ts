/**
 * The entrypoint: reads configuration, composes every live Layer once and serves until SIGTERM
 * (in-flight requests drain, then exit 0).
 */
import { createServer } from "node:http"
import { NodeHttpClient, NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Layer, Logger } from "effect"
import { HttpRouter } from "effect/http"
import { AppRoutes } from "./app.ts"
import { AppConfig } from "./config.ts"
import { ConfigInvalid } from "./env.ts"
import { AccessLog } from "./http/AccessLog.ts"
import { MetricsServer } from "./http/metrics.ts"
import { RequestCounterMemory, RequestCounterRedis } from "./http/rateLimit.ts"
import { routerConfig } from "./http/routeTable.ts"
import { NewsletterLayer } from "./newsletter/layer.ts"
import { OAuthLive } from "./oauth/layers.ts"
import * as CoinGeckoRates from "./rates/CoinGeckoRates.ts"
import { RedisLive } from "./redis.ts"

const Upstreams = Layer.mergeAll(CoinGeckoRates.layer, NewsletterLayer).pipe(Layer.provide(NodeHttpClient.layerUndici))

/** Memory by default; with REDIS_URL, state that all instances must share lives in Redis. */
const SharedState = Layer.unwrap(
  Effect.map(AppConfig, (config) =>
    config.redisUrl === undefined
      ? RequestCounterMemory
      : RequestCounterRedis.pipe(Layer.provide(RedisLive(config.redisUrl))))
)

export const Services = Layer.mergeAll(Upstreams, OAuthLive, AccessLog.stdout, SharedState).pipe(
  Layer.provideMerge(AppConfig.layer)
)

const HttpServerLive = Layer.unwrap(
  Effect.map(AppConfig, (config) =>
    NodeHttpServer.layer(
      // Slow-loris protection: bounded time to send headers and the whole request.
      () => createServer({ headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 }),
      { port: config.port, host: config.host, gracefulShutdownTimeout: "10 seconds" }
    ))
).pipe(Layer.provide(AppConfig.layer))

const Metrics = Layer.unwrap(
  Effect.map(AppConfig, (config) =>
    config.metricsPort === undefined ? Layer.empty : MetricsServer(config.metricsPort, config.metricsHost))
).pipe(Layer.provide(AppConfig.layer))

export const Main = Layer.merge(HttpRouter.serve(AppRoutes, { disableLogger: true, routerConfig }), Metrics).pipe(
  Layer.provide(Services),
  Layer.provide(HttpServerLive),
  Layer.provide(Logger.layer([Logger.consoleJson]))
)

NodeRuntime.runMain(Layer.launch(Main), {
  // SIGTERM/SIGINT interrupt the server fiber after draining: that is a clean stop, exit 0.
  teardown: (exit, onExit) => {
    if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return onExit(0)
    const failure = Cause.squash(exit.cause)
    if (failure instanceof ConfigInvalid) process.stderr.write(`${failure.message}\n`)
    onExit(1)
  }
})
