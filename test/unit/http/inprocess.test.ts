/**
 * The same application in process (no socket): HttpRouter.toWebHandler with swapped Layers.
 */
import { Context, Layer } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { describe, expect, it } from "vitest"
import { appPriceHub, AppRoutes } from "../../../src/app.ts"
import { Health } from "../../../src/health/Health.ts"
import { Readiness } from "../../../src/lifecycle/Readiness.ts"
import { RatesAnswerMemo } from "../../../src/rates/answer.ts"
import { routerConfig } from "../../../src/http/routeTable.ts"
import { appServices } from "../../../src/services.ts"
import { testServices } from "../../support/app.ts"

const services = Layer.merge(HttpServer.layerServices, appServices(testServices({ APP_ENV: "staging", PUBLIC_BASE_URL: "https://in.process" })))

describe("in process", () => {
  it("serves the contract through a web handler", async () => {
    const { handler, dispose } = HttpRouter.toWebHandler(
      AppRoutes.pipe(Layer.provide(Layer.mergeAll(Health.layer, RatesAnswerMemo.layer, appPriceHub())), Layer.provide(services), Layer.provide(Readiness.layer)),
      { disableLogger: true, routerConfig }
    )
    try {
      const health = await handler(new Request("http://x/api/health"), Context.empty())
      expect(await health.json()).toMatchObject({ status: "healthy", environment: "staging" })
      const missing = await handler(
        new Request("http://x/api/subscribe", { method: "POST", body: "{}", headers: { "content-type": "application/json" } }),
        Context.empty()
      )
      expect(missing.status).toBe(400)
      expect((await missing.json()).type).toBe("https://in.process/problems/validation_failed")
    } finally {
      await dispose()
    }
  })
})
