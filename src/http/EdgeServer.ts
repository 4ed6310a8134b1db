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
import { HttpServer } from "effect/http"
import { type AppHandler, Edge } from "./edge.ts"

export interface EdgeServerOptions {
  readonly port: number
  readonly host?: string | undefined
  readonly drainTimeout?: Duration.Input | undefined
}

const make = (options: EdgeServerOptions) =>
  Effect.gen(function*() {
    const edge = yield* Edge
    let app: AppHandler | undefined
    const early: Array<readonly [IncomingMessage, ServerResponse]> = []
    // Slow-loris protection (C8): bounded time to send headers and the whole request.
    const server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 }, (req, res) =>
      app === undefined ? void early.push([req, res]) : edge.handle(req, res, app))
    const base = yield* NodeHttpServer.make(() => server, {
      port: options.port,
      ...(options.host === undefined ? {} : { host: options.host }),
      disablePreemptiveShutdown: true
    })
    const drainTimeout = options.drainTimeout ?? Duration.seconds(10)
    const drain = Effect.callback<void>((resume) => {
      server.close(() => resume(Effect.void))
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
          })
          // Runs before the handler's scope closes: in-flight requests finish first.
          yield* Scope.addFinalizer(scope, drain)
          app = handler
          for (const [req, res] of early.splice(0)) edge.handle(req, res, handler)
        })
    })
  })

export const EdgeServer = {
  /** The server on `port`/`host`, with Node's HTTP platform services; needs the `Edge`. */
  layer: (options: EdgeServerOptions) =>
    Layer.mergeAll(Layer.effect(HttpServer.HttpServer, make(options)), NodeHttpServer.layerHttpServices)
}
