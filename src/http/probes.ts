/**
 * Probes for orchestrators (CONTRACT C3), outside the public contract and the OpenAPI document, never
 * rate-limited: `/livez` answers while the process runs; `/readyz` answers 200 when this instance can
 * serve, and a 503 problem while it drains after SIGTERM or while a dependency it was configured with
 * (Redis; PostgreSQL) is unreachable. A dependency adds its own check with `Readiness.addCheck`
 * (src/lifecycle/Readiness.ts).
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { AppConfig } from "../config/AppConfig.ts"
import { Readiness } from "../lifecycle/Readiness.ts"
import { documentPaths } from "./documentRoutes.ts"
import { problemResponse } from "./problemResponse.ts"
import { CurrentRequestId } from "./requestId.ts"

const json = (body: unknown) => HttpServerResponse.jsonUnsafe(body, { headers: { "cache-control": "no-store" } })

export const ProbeRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  const readiness = yield* Readiness
  const readyz = Effect.gen(function*() {
    const status = yield* readiness.status
    if (status.ready) return json({ status: "ready" })
    const ctx = { baseUrl: config.publicBaseUrl, requestId: yield* CurrentRequestId }
    return problemResponse("service_unavailable", ctx, {
      detail: `Not ready: ${status.reasons.join("; ")}.`,
      retryAfter: 5
    })
  })
  return Layer.mergeAll(
    HttpRouter.add("GET", documentPaths.livez, json({ status: "alive" })),
    HttpRouter.add("GET", documentPaths.readyz, readyz)
  )
}))
