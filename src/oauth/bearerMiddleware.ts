/**
 * HTTP binding of BearerAuth (CONTRACT C6): the edge's BearerCheck (src/http/BearerCheck.ts), which
 * checks the token before the HttpApi runs (it decides the rate-limit tier), and the OptionalBearer
 * middleware of the contract, which turns that verdict and the operation's scope into the contract's
 * 401/403, or the caller.
 */
import { Context, Effect, Layer } from "effect"
import { HttpServerRequest } from "effect/http"
import { CurrentClient, OptionalBearer, RequiredScope } from "../api/Api.ts"
import { InsufficientScope, InvalidToken } from "../api/problems.ts"
import { BearerCheck } from "../http/BearerCheck.ts"
import { exchangeOf } from "../http/exchange.ts"
import { BearerAuth } from "./BearerAuth.ts"

export const BearerCheckLive: Layer.Layer<BearerCheck, never, BearerAuth> = Layer.effect(
  BearerCheck,
  Effect.gen(function*() {
    const bearer = yield* BearerAuth
    return BearerCheck.of({
      verify: (authorization) =>
        bearer.authenticate(authorization, undefined).pipe(
          Effect.map((result) => result._tag === "Authenticated" ? { caller: result.principal } : undefined),
          Effect.catchTag("InvalidToken", (invalid) => Effect.succeed({ invalid })),
          // Without a scope to check, nothing else can fail.
          Effect.orDie
        )
    })
  })
)

export const OptionalBearerLive = Layer.effect(
  OptionalBearer,
  Effect.gen(function*() {
    const bearer = yield* BearerCheck
    return (httpEffect, { endpoint }) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const authorization = request.headers["authorization"]
        // Anonymous calls are most calls: nothing to check.
        if (authorization === undefined) return yield* httpEffect
        // The edge's verdict when it checked the token (for a rate-limited operation), else checked here.
        const verdict = exchangeOf(request)?.bearer ?? (yield* bearer.verify(authorization))
        if (verdict === undefined) return yield* httpEffect
        if ("invalid" in verdict) return yield* Effect.fail(new InvalidToken({ detail: verdict.invalid.detail }))
        const scope = Context.getOrUndefined(endpoint.annotations, RequiredScope)
        if (scope !== undefined && !verdict.caller.scopes.includes(scope)) {
          return yield* Effect.fail(new InsufficientScope({ detail: `This operation requires the scope ${scope}.`, scope }))
        }
        return yield* Effect.provideService(httpEffect, CurrentClient, verdict.caller)
      })
  })
)
