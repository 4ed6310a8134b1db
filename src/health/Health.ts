/**
 * What GET /api/health reports (spec §4, CONTRACT C3). One instance per process, so that the
 * HttpApi handler and the fast lane report the same start time.
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { HealthResponse } from "../api/schemas.ts"
import { AppConfig } from "../config/AppConfig.ts"

export class Health extends Context.Service<Health, {
  /** The report at `now` (epoch ms): uptime in fractional seconds since this instance started. */
  readonly report: (now: number) => HealthResponse
}>()("app/Health") {
  static readonly layer = Layer.effect(
    Health,
    Effect.gen(function*() {
      const { appEnv } = yield* AppConfig
      const startedAt = yield* Clock.currentTimeMillis
      return Health.of({
        // Members in the order of the HealthResponse schema: the fast lane serialises this as is.
        report: (now) => ({
          status: "healthy",
          timestamp: new Date(now).toISOString(),
          uptime: Math.max(0, now - startedAt) / 1000,
          environment: appEnv
        })
      })
    })
  )
}
