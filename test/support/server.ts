/**
 * Serves the real application on an ephemeral port with the Layers a test chooses, so that tests
 * go through real HTTP (sockets, Node's parser, the edge middleware) with fakes or emulators behind.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { FastLane } from "../../src/http/fastLane.ts"
import { createAppServer } from "../../src/http/nodeServer.ts"
import { routerConfig } from "../../src/http/routeTable.ts"

export interface TestServer {
  readonly url: string
  readonly close: () => Promise<void>
}

/**
 * `services` must provide everything AppRoutes needs (config, capabilities, access log) and what
 * `frontDoor` needs; the server is the production one (src/http/nodeServer.ts) with that lane in
 * front (FastLane.off: every request to the Effect app).
 */
export const serve = async (
  routes: Layer.Layer<never, unknown, any>,
  services: Layer.Layer<any, unknown, never>,
  frontDoor: Layer.Layer<FastLane, unknown, any> = FastLane.off
): Promise<TestServer> => {
  const scope = await Effect.runPromise(Scope.make())
  const nodeServer = Layer.unwrap(
    Effect.map(FastLane, (lane) => NodeHttpServer.layer(() => createAppServer(lane.handle), { port: 0, host: "127.0.0.1" }))
  ).pipe(Layer.provide(frontDoor), Layer.provide(services))
  const server = HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true, routerConfig }).pipe(
    Layer.provide(services),
    Layer.provideMerge(nodeServer)
  )
  const context = await Effect.runPromise(Layer.buildWithScope(server, scope) as Effect.Effect<any, unknown, never>)
  const address = Context.get(context as Context.Context<HttpServer.HttpServer>, HttpServer.HttpServer).address
  const url = address._tag === "UnixPathAddress" ? "http://unix" : `http://127.0.0.1:${address.port}`
  return { url, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}
