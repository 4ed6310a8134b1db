/**
 * Serves the real application on an ephemeral port with the Layers a test chooses, so that tests
 * go through real HTTP (sockets, Node's parser, the edge middleware) with fakes or emulators behind.
 */
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { routerConfig } from "../../src/http/routeTable.ts"

export interface TestServer {
  readonly url: string
  readonly close: () => Promise<void>
}

/** `services` must provide everything AppRoutes needs (config, capabilities, access log). */
export const serve = async (
  routes: Layer.Layer<never, unknown, any>,
  services: Layer.Layer<any, unknown, never>
): Promise<TestServer> => {
  const scope = await Effect.runPromise(Scope.make())
  const server = HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true, routerConfig }).pipe(
    Layer.provide(services),
    Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" }))
  )
  const context = await Effect.runPromise(Layer.buildWithScope(server, scope) as Effect.Effect<any, unknown, never>)
  const address = Context.get(context as Context.Context<HttpServer.HttpServer>, HttpServer.HttpServer).address
  const url = address._tag === "UnixPathAddress" ? "http://unix" : `http://127.0.0.1:${address.port}`
  return { url, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}
