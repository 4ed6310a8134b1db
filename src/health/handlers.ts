/** GET/HEAD /api/health (spec §4, CONTRACT C3): uptime in fractional seconds since this instance started. */
import { Clock, Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { AppConfig } from "../config.ts"

export const HealthHandlers = HttpApiBuilder.group(
  Api,
  "health",
  Effect.fn(function*(handlers) {
    const config = yield* AppConfig
    const startedAt = yield* Clock.currentTimeMillis
    return handlers.handle("getHealth", () =>
      Effect.map(Clock.currentTimeMillis, (now) => ({
        status: "healthy" as const,
        timestamp: new Date(now).toISOString(),
        uptime: Math.max(0, now - startedAt) / 1000,
        environment: config.appEnv
      })))
  })
)
