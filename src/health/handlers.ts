/** GET/HEAD /api/health (spec §4, CONTRACT C3). */
import { Clock, Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { Health } from "./Health.ts"

export const HealthHandlers = HttpApiBuilder.group(
  Api,
  "health",
  Effect.fn(function*(handlers) {
    const health = yield* Health
    return handlers.handle("getHealth", () => Effect.map(Clock.currentTimeMillis, health.report))
  })
)
