/**
 * Serves the real server (src/server.ts `ServerLive`: the edge, the HttpApi, the documents) on an
 * ephemeral port with the services a test chooses, so that tests go through real HTTP (sockets,
 * Node's parser, the edge) with fakes or emulators behind.
 */
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpServer } from "effect/http"
import type { HttpLimits } from "../../src/http/EdgeServer.ts"
import type { PriceHubTiming } from "../../src/prices/PriceHub.ts"
import { ServerLive } from "../../src/server.ts"
import type { AppServiceLayers } from "../../src/services.ts"

export interface TestServer {
  readonly url: string
  readonly close: () => Promise<void>
}

export const serve = async (services: AppServiceLayers, limits?: Partial<HttpLimits>, priceHub?: PriceHubTiming): Promise<TestServer> => {
  const scope = await Effect.runPromise(Scope.make())
  const server = ServerLive({ services, port: 0, host: "127.0.0.1", quiet: true, limits, priceHub })
  const context = await Effect.runPromise(Layer.buildWithScope(server, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  const url = address._tag === "UnixPathAddress" ? "http://unix" : `http://127.0.0.1:${address.port}`
  return { url, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}
