/**
 * Which methods each known path accepts, for 405 + Allow (the router itself only knows "not found").
 * Built once from the HttpApi definition plus the non-API pages.
 */
import * as FindMyWay from "effect/http/FindMyWay"
import { HttpApi } from "effect/http-api"
import { Api } from "../api/Api.ts"

/**
 * Paths are matched exactly: no trailing-slash or case folding, so every resource has one URL and
 * the 405 table agrees with the router. Pass it to `HttpRouter.serve({ routerConfig })`.
 */
export const routerConfig: Partial<FindMyWay.RouterConfig> = {
  ignoreTrailingSlash: false,
  ignoreDuplicateSlashes: false,
  caseSensitive: true
}

export interface RouteMatch {
  /** The route pattern, e.g. `/problems/:code`: a bounded label for metrics. */
  readonly pattern: string
  readonly methods: ReadonlyArray<string>
}

export interface RouteTable {
  /** The route for the path, or undefined for an unknown path. */
  readonly match: (path: string) => RouteMatch | undefined
}

/** Pages served beside the API: documentation, problem types, OpenAPI. */
export const extraRoutes: ReadonlyArray<readonly [path: FindMyWay.PathInput, methods: ReadonlyArray<string>]> = [
  ["/openapi.json", ["GET", "HEAD"]],
  ["/docs", ["GET", "HEAD"]],
  ["/problems/:code", ["GET", "HEAD"]]
]

export const makeRouteTable = (
  extra: ReadonlyArray<readonly [FindMyWay.PathInput, ReadonlyArray<string>]> = extraRoutes
): RouteTable => {
  const byPath = new Map<string, Set<string>>()
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const methods = byPath.get(endpoint.path) ?? new Set<string>()
      methods.add(endpoint.method)
      // HEAD is answered wherever GET is (RFC 9110 §9.1).
      if (endpoint.method === "GET") methods.add("HEAD")
      byPath.set(endpoint.path, methods)
    }
  })
  for (const [path, methods] of extra) byPath.set(path, new Set([...(byPath.get(path) ?? []), ...methods]))
  const router = FindMyWay.make<RouteMatch>(routerConfig)
  const order = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
  for (const [path, methods] of byPath) {
    router.all(path as FindMyWay.PathInput, {
      pattern: path,
      methods: [...methods].sort((a, b) => order.indexOf(a) - order.indexOf(b))
    })
  }
  return {
    match: (path) => router.find("GET", path)?.handler
  }
}
