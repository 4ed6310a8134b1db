/**
 * The Node HTTP server with the edge as its request listener: Effect's `HttpServer` service whose
 * `serve` builds the HttpApi app's Node handler and lets the edge hand requests to it.
 *
 * The listener is attached when the server is created, not when the app is served: a request that
 * arrives between `listen` and `serve` is held, then handled, instead of never being answered.
 * SIGTERM (scope close) stops accepting, lets in-flight requests finish for `drainTimeout`, then
 * closes whatever is left.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Duration, Effect, Layer, Scope } from "effect"
import { HttpMiddleware, HttpServer } from "effect/http"
import { AppConfig } from "../config/AppConfig.ts"
import { makeIsTrustedPeer } from "./clientIp.ts"
import { capConnectionsPerAddress } from "./connectionCap.ts"
import { listenFailure } from "../startup.ts"
import { type AppHandler, Edge } from "./edge.ts"
import { Readiness } from "../lifecycle/Readiness.ts"

/** Deadlines of a request (C8) and of an idle connection. */
export interface HttpLimits {
  /** The request headers must have arrived within this (C8: 10 s). */
  readonly headersTimeout: Duration.Input
  /** The whole request, body included, within this (C8: 30 s). */
  readonly requestTimeout: Duration.Input
  /** How often Node looks for requests past those deadlines: each is enforced within this much of it. */
  readonly checkInterval: Duration.Input
  /** An idle keep-alive connection is closed after this. */
  readonly keepAliveTimeout: Duration.Input
}

export const defaultHttpLimits: HttpLimits = {
  headersTimeout: "10 seconds",
  requestTimeout: "30 seconds",
  // Node's default (30 s) let a 10 s header deadline run to 40 s.
  checkInterval: "1 second",
  keepAliveTimeout: "5 seconds"
}

/** Node's server options for these limits. */
export const nodeServerOptions = (limits: Partial<HttpLimits> = {}) => {
  const all = { ...defaultHttpLimits, ...limits }
  const millis = (d: Duration.Input) => Duration.toMillis(Duration.fromInputUnsafe(d))
  return {
    headersTimeout: millis(all.headersTimeout),
    requestTimeout: millis(all.requestTimeout),
    connectionsCheckingInterval: millis(all.checkInterval),
    keepAliveTimeout: millis(all.keepAliveTimeout)
  }
}

export interface EdgeServerOptions {
  readonly port: number
  readonly host?: string | undefined
  readonly drainTimeout?: Duration.Input | undefined
  /** C8's deadlines by default; tests shorten them. */
  readonly limits?: Partial<HttpLimits> | undefined
}

const make = (options: EdgeServerOptions) =>
  Effect.gen(function*() {
    const edge = yield* Edge
    const config = yield* AppConfig
    let app: AppHandler | undefined
    const early: Array<readonly [IncomingMessage, ServerResponse]> = []
    // Slow-loris protection (C8): bounded time to send headers and the whole request, and sockets per address.
    const server = createServer(nodeServerOptions(options.limits), (req, res) =>
      app === undefined ? void early.push([req, res]) : edge.handle(req, res, app))
    capConnectionsPerAddress(server, config.maxConnectionsPerAddress, makeIsTrustedPeer(config.trustProxyRule))
    const base = yield* NodeHttpServer.make(() => server, {
      port: options.port,
      ...(options.host === undefined ? {} : { host: options.host }),
      disablePreemptiveShutdown: true
    }).pipe(Effect.mapError((error) => listenFailure(error, options.port, options.host)))
    const drainTimeout = options.drainTimeout ?? Duration.seconds(10)
    const readiness = yield* Readiness
    // From the moment draining begins, /readyz answers 503 and every response closes its connection,
    // so that keep-alive clients go elsewhere and the drain ends with the last in-flight request.
    const drain = Effect.callback<void>((resume) => {
      readiness.startDraining()
      // Event streams never end on their own: ended now, their clients reconnect elsewhere (C10).
      edge.endStreams()
      server.prependListener("request", (_req: IncomingMessage, res: ServerResponse) => res.setHeader("connection", "close"))
      // Requests accepted before kept their keep-alive: close their connections once they are idle.
      const sweep = setInterval(() => server.closeIdleConnections(), 100)
      server.close(() => {
        clearInterval(sweep)
        resume(Effect.void)
      })
    }).pipe(
      Effect.timeoutOrElse({ duration: drainTimeout, orElse: () => Effect.sync(() => server.closeAllConnections()) })
    )
    return HttpServer.make({
      address: base.address,
      serve: (httpApp, middleware) =>
        Effect.gen(function*() {
          const scope = yield* Effect.scope
          const handler = yield* NodeHttpServer.makeHandler(httpApp, {
            middleware: middleware as any,
            scope: Scope.forkUnsafe(scope, "parallel")
          }).pipe(
            // The edge makes every request's server span (observability/requestSpan.ts), the HttpApi's too: not a second one.
            Effect.provideService(HttpMiddleware.TracerDisabledWhen, () => true)
          )
          // Runs before the handler's scope closes: in-flight requests finish first.
          yield* Scope.addFinalizer(scope, drain)
          app = handler
          for (const [req, res] of early.splice(0)) edge.handle(req, res, handler)
        })
    })
  })

export const EdgeServer = {
  /** The server on `port`/`host`, with Node's HTTP platform services; needs the `Edge`, `AppConfig` and `Readiness`. */
  layer: (options: EdgeServerOptions) =>
    Layer.mergeAll(Layer.effect(HttpServer.HttpServer, make(options)), NodeHttpServer.layerHttpServices)
}
