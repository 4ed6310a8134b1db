/** GET/HEAD /api/health as a ready answer: the handler's report, serialised as the HttpApi would. */
import { Clock, Effect } from "effect"
import type { ReadyAnswer } from "../http/ReadyAnswers.ts"
import { Health } from "./Health.ts"

export const healthReadyAnswer: Effect.Effect<ReadyAnswer, never, Health> = Effect.gen(function*() {
  const health = yield* Health
  const clock = yield* Clock.clockWith(Effect.succeed)
  return {
    operationId: "getHealth",
    // The report's members are all JSON-native: encoding HealthResponse leaves it as it is.
    answer: () => JSON.stringify(health.report(clock.currentTimeMillisUnsafe()))
  }
})
