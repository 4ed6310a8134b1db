/**
 * Optional Bearer authentication on the public operations (CONTRACT C6, RFC 6750).
 *
 * - No Authorization header → anonymous (no challenge; the operations are public).
 * - Anything else must be `Bearer <b64token>` (scheme case-insensitive, RFC 9110 §11.1); `Basic …`,
 *   `Bearer` without a token, or extra parts → InvalidToken, like a bad or expired token:
 *   401 + `WWW-Authenticate: Bearer realm="api", error="invalid_token"`.
 * - A valid token without the operation's scope → InsufficientScope:
 *   403 + `WWW-Authenticate: Bearer realm="api", error="insufficient_scope", scope="<scope>"`.
 * Tokens in the query or the form body (RFC 6750 §2.2-2.3) are not supported.
 */
import { Context, Effect, Layer } from "effect"
import { InsufficientScope, InvalidToken } from "./errors.ts"
import type { Scope } from "./scopes.ts"
import { type Principal, TokenService } from "./TokenService.ts"

const BEARER_REALM = "api"

/** Exact `WWW-Authenticate` values. */
export const BearerChallenge = {
  invalidToken: `Bearer realm="${BEARER_REALM}", error="invalid_token"`,
  insufficientScope: (scope: Scope) => `Bearer realm="${BEARER_REALM}", error="insufficient_scope", scope="${scope}"`
} as const

/** The challenge for a BearerAuth failure, so the HTTP layer never builds one by hand. */
export const challengeFor = (error: InvalidToken | InsufficientScope): string =>
  error._tag === "InvalidToken" ? BearerChallenge.invalidToken : BearerChallenge.insufficientScope(error.requiredScope)

type BearerResult =
  | { readonly _tag: "Anonymous" }
  | { readonly _tag: "Authenticated"; readonly principal: Principal }

export interface BearerAuthShape {
  readonly authenticate: (
    authorization: string | undefined,
    requiredScope: Scope | undefined
  ) => Effect.Effect<BearerResult, InvalidToken | InsufficientScope>
}

/** RFC 6750 §2.1: `Bearer 1*SP b64token`, b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*)$/i

export const parseBearer = (authorization: string): string | undefined =>
  BEARER.exec(authorization.trim())?.[1]

const malformedHeader = new InvalidToken({
  reason: "malformed",
  detail: "The Authorization header must be `Bearer <access token>`."
})

export class BearerAuth extends Context.Service<BearerAuth, BearerAuthShape>()("app/oauth/BearerAuth") {
  static readonly layer: Layer.Layer<BearerAuth, never, TokenService> = Layer.effect(
    BearerAuth,
    Effect.gen(function*() {
      const tokens = yield* TokenService
      const authenticate: BearerAuthShape["authenticate"] = (authorization, requiredScope) =>
        Effect.gen(function*() {
          if (authorization === undefined) return { _tag: "Anonymous" } as const
          const token = parseBearer(authorization)
          if (token === undefined) return yield* Effect.fail(malformedHeader)
          const principal = yield* tokens.verify(token)
          if (requiredScope !== undefined && !principal.scopes.includes(requiredScope)) {
            return yield* Effect.fail(
              new InsufficientScope({
                requiredScope,
                grantedScopes: principal.scopes,
                detail: `This operation requires the scope ${requiredScope}.`
              })
            )
          }
          return { _tag: "Authenticated", principal } as const
        })
      return { authenticate }
    })
  )
}
