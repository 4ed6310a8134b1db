/** HTTP binding of BearerAuth: the OptionalBearer middleware of the contract (CONTRACT C6). */
import { Context, Effect, Layer } from "effect"
import { HttpServerRequest } from "effect/http"
import { CurrentClient, OptionalBearer, RequiredScope } from "../api/Api.ts"
import { InsufficientScope, InvalidToken } from "../api/problems.ts"
import { BearerAuth } from "./BearerAuth.ts"

export const OptionalBearerLive = Layer.effect(
  OptionalBearer,
  Effect.gen(function*() {
    const bearer = yield* BearerAuth
    return (httpEffect, { endpoint }) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        // Anonymous calls are most calls: nothing to verify.
        if (request.headers["authorization"] === undefined) return yield* httpEffect
        const scope = Context.getOrUndefined(endpoint.annotations, RequiredScope)
        const result = yield* bearer.authenticate(request.headers["authorization"], scope).pipe(
          Effect.mapError((e) =>
            e._tag === "InvalidToken"
              ? new InvalidToken({ detail: e.detail })
              : new InsufficientScope({ detail: e.detail, scope: e.requiredScope })
          )
        )
        return yield* result._tag === "Authenticated"
          ? Effect.provideService(httpEffect, CurrentClient, result.principal)
          : httpEffect
      })
  })
)
