/** GET/HEAD /api/health on the fast lane: the same report as the handler, serialised as HttpApi would. */
import { Clock, Effect } from "effect"
import type { FastRoute } from "../http/fastLane.ts"
import { Health } from "./Health.ts"

export const healthFastRoute: Effect.Effect<FastRoute, never, Health> = Effect.gen(function*() {
  const health = yield* Health
  const clock = yield* Clock.clockWith(Effect.succeed)
  return {
    path: "/api/health",
    methods: ["GET", "HEAD"],
    policy: "health",
    // The report's members are all JSON-native: encoding HealthResponse leaves it as it is.
    answer: () => JSON.stringify(health.report(clock.currentTimeMillisUnsafe()))
  }
})
