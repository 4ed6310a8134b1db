/**
 * The edge answers 404 itself when its route table has no route for a path (issue 17), so the table
 * must know every route the application serves: the HttpApi's operations, the documents and the
 * probes. The application is built on a router that records what is added to it, and the table is
 * compared with that record both ways.
 */
import { Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter } from "effect/http"
import { describe, expect, it } from "vitest"
import { appPriceHub, AppRoutes } from "../../../src/app.ts"
import { Health } from "../../../src/health/Health.ts"
import { Readiness } from "../../../src/lifecycle/Readiness.ts"
import { makeRouteTable, routerConfig } from "../../../src/http/routeTable.ts"
import { RatesAnswerMemo } from "../../../src/rates/answer.ts"
import { appServices } from "../../../src/services.ts"
import { testServices } from "../../support/app.ts"

/** Every (method, path) the application adds to its router, as src/server.ts builds it. */
const servedRoutes = async () => {
  const added: Array<{ readonly method: string; readonly path: string }> = []
  const Recording = Layer.effect(
    HttpRouter.HttpRouter,
    Effect.map(HttpRouter.make, (router) =>
      HttpRouter.HttpRouter.of({
        ...router,
        addAll: (routes) => {
          for (const route of routes) added.push({ method: route.method, path: route.path })
          return router.addAll(routes)
        },
        add: (method, path, handler, options) => {
          added.push({ method, path })
          return router.add(method, path, handler, options)
        }
      }))
  ).pipe(Layer.provide(Layer.succeed(HttpRouter.RouterConfig)(routerConfig)))
  const services = Layer.mergeAll(Health.layer, RatesAnswerMemo.layer, appPriceHub()).pipe(Layer.provideMerge(appServices(testServices())), Layer.provideMerge(Readiness.layer))
  // The route markers of HttpRouter's types are what HttpRouter.serve discharges; building is enough here.
  const app = AppRoutes.pipe(Layer.provide(Recording), Layer.provide(services)) as unknown as Layer.Layer<never>
  const scope = await Effect.runPromise(Scope.make())
  try {
    await Effect.runPromise(Layer.buildWithScope(app, scope))
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  return added
}

describe("the edge's route table", () => {
  it("has every route the application serves, and no other", async () => {
    const served = await servedRoutes()
    // The HttpApi's operations, the documents and the probes at least.
    for (const path of ["/api/health", "/api/v1/exchange-rates", "/api/subscribe", "/oauth/token", "/openapi.json", "/problems/:code", "/livez", "/readyz"]) {
      expect(served.map((r) => r.path)).toContain(path)
    }
    const table = makeRouteTable()
    for (const { method, path } of served) {
      const route = table.match(path)
      expect(route?.pattern, `${method} ${path}`).toBe(path)
      if (method !== "*") expect(route?.methods, `${method} ${path}`).toContain(method)
    }
    const patterns = new Set(served.map((r) => r.path))
    expect(table.routes.map((r) => r.pattern).sort()).toEqual([...patterns].sort())
    // Every method the table allows on a route is served there (HEAD by GET's route, as the router does).
    for (const pattern of patterns) {
      const methods = new Set(served.filter((r) => r.path === pattern).map((r) => r.method))
      for (const method of table.match(pattern)!.methods) {
        expect(methods.has(method) || methods.has("*") || (method === "HEAD" && methods.has("GET")), `${method} ${pattern}`).toBe(true)
      }
    }
  })
})
