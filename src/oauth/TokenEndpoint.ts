/**
 * POST /oauth/token, independent of the HTTP framework (CONTRACT C6, RFC 6749 §2.3.1, §3.2, §4.4, §5).
 * The route hands over the raw Authorization and Content-Type headers, the raw body and the client
 * address, and sends back exactly the status, headers and JSON body returned here. Reading the request
 * is tokenRequest.ts; the answers' shapes are src/api/tokenResponse.ts; this file is the order of decisions.
 *
 * Decisions (documented for the API reference):
 * - `client_secret_basic`, or `private_key_jwt` (`client_assertion_type` + `client_assertion`, RFC 7523
 *   §2.2; assertion/ClientAssertion.ts): one method per client, and per request. Credentials in the body
 *   (`client_secret`, `client_assertion*`, a `client_id` naming another client) next to Basic, or a
 *   `client_secret` next to an assertion → 400 invalid_request (§2.3); a `client_id` naming the
 *   authenticating client is accepted (client libraries send it); a `client_secret` in the body alone →
 *   401 invalid_client (client_secret_post is not supported).
 * - Every failed authentication, whichever method and whichever check failed, is the same 401
 *   invalid_client body for that method, counted by the failure limiter; why is in the outcome (logs).
 * - A body that is not `application/x-www-form-urlencoded` (charset, if given, must be UTF-8) → 400
 *   invalid_request with an `application/json` body, not 415: OAuth clients only parse RFC 6749 errors.
 *   A `Content-Encoding` → 400 invalid_request: the body is read as sent, and a gateway that decodes
 *   it would read another one.
 * - `scope` absent or empty → every scope the client is registered for. Unknown, not allowed or
 *   malformed (RFC 6749 §3.3 syntax) → 400 invalid_scope. The granted `scope` is always echoed.
 * - A parameter the endpoint reads (grant_type, scope, client_id, client_secret, client_assertion,
 *   client_assertion_type) given twice with a value → 400 invalid_request; empty values count as absent;
 *   other parameters are ignored (§3.2).
 * - Rate limiting (FailureLimiter.ts): failed client authentications count per (address, client)
 *   pair and per address (malformed Basic credentials per address); a limit reached answers 429 with
 *   `Retry-After` until the window frees, the right secret included. Never per client alone: nobody
 *   else's failures refuse a client's right secret. RFC 6749 has no error code for this and an
 *   invented one would break clients, so the body says `"error": "invalid_request"` with problem
 *   `code`/`type` `rate_limited` (as the HTTP layer's 405 and 413 do, src/api/tokenResponse.ts).
 */
import { Context, Effect, Layer } from "effect"
import {
  BASIC_CHALLENGE,
  BASIC_CHALLENGE_INVALID_CLIENT,
  errorResponse,
  type ErrorOptions,
  issuedResponse,
  type TokenEndpointResponse,
  type TokenErrorCode
} from "../api/tokenResponse.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { ClientAssertion, claimedClient } from "./assertion/ClientAssertion.ts"
import { ClientRegistry } from "./ClientRegistry.ts"
import type { ClientAuthFailed } from "./errors.ts"
import { type Blocked, FailureLimiter } from "./FailureLimiter.ts"
import type { OAuthClient } from "./oauthClient.ts"
import { parseScopeString, type Scope } from "./scopes.ts"
import { isEncoded, isFormContentType, parseBasicAuthorization, parseTokenForm } from "./tokenRequest.ts"
import { TokenService } from "./TokenService.ts"

export {
  BASIC_CHALLENGE,
  BASIC_CHALLENGE_INVALID_CLIENT,
  type TokenEndpointResponse,
  type TokenErrorBody,
  type TokenSuccessBody
} from "../api/tokenResponse.ts"

interface TokenRequestInput {
  /** The raw `Authorization` header, if any. */
  readonly authorization: string | undefined
  /** The raw `Content-Type` header, if any. */
  readonly contentType: string | undefined
  /** The raw `Content-Encoding` header, if any. */
  readonly contentEncoding?: string | undefined
  /** The raw request body (already size-limited by the HTTP layer). */
  readonly body: string
  /** The caller's address as the HTTP layer determined it (TRUST_PROXY aware). */
  readonly clientIp: string
  /** When given, error bodies get `instance: "urn:uuid:<requestId>"` like every other problem (C7). */
  readonly requestId?: string | undefined
}

export interface TokenEndpointShape {
  readonly handle: (input: TokenRequestInput) => Effect.Effect<TokenEndpointResponse>
}

const AUTHENTICATE_WITH_BASIC =
  "Authenticate with HTTP Basic: the form-encoded client id and secret (RFC 6749 section 2.3.1), or, for a " +
  "private_key_jwt client, with client_assertion_type and client_assertion (RFC 7523 section 2.2)."

/** How to mend a failed authentication, per method; never which check failed. */
const CHECK_SECRET =
  "Check the client id and secret; they are form-encoded before base64 (RFC 6749 section 2.3.1). Ask the operator if the client was revoked or its secret rotated."
const CHECK_ASSERTION =
  "Sign a new assertion with a key the client registered: iss and sub the client id, aud the issuer, exp at most 5 minutes ahead, " +
  "iat, a jti never used before; RS256, PS256, ES256 or EdDSA. Ask the operator if the client was revoked or registered for another method."

/** One client authentication to attempt: whom it claims to be (for the failure limits) and how to check it. */
interface Attempt {
  readonly method: "client_secret_basic" | "private_key_jwt"
  readonly claimed: string | undefined
  readonly check: Effect.Effect<OAuthClient, ClientAuthFailed>
  readonly resolution: string
  readonly challenge: string
}

export class TokenEndpoint extends Context.Service<TokenEndpoint, TokenEndpointShape>()("app/oauth/TokenEndpoint") {
  static readonly layer: Layer.Layer<TokenEndpoint, never, AppConfig | ClientRegistry | ClientAssertion | TokenService | FailureLimiter> =
    Layer.effect(
      TokenEndpoint,
      Effect.gen(function*() {
        const config = yield* AppConfig
        const registry = yield* ClientRegistry
        const assertions = yield* ClientAssertion
        const tokens = yield* TokenService
        const limiter = yield* FailureLimiter

        const handle = (input: TokenRequestInput): Effect.Effect<TokenEndpointResponse> =>
          Effect.gen(function*() {
            const context = { publicBaseUrl: config.publicBaseUrl, requestId: input.requestId }
            const fail = (
              status: 400 | 401 | 429,
              error: TokenErrorCode,
              description: string,
              resolution: string,
              options: ErrorOptions
            ) => errorResponse(context, status, error, description, resolution, options)
            const badRequest = (description: string, resolution: string, reason: string) =>
              fail(400, "invalid_request", description, resolution, { reason })
            const rateLimited = ({ limit, policy, retryAfterSeconds }: Blocked) => {
              const what = policy === "oauth-address-failures" ? "from this address" : "for this client from this address"
              return fail(
                429,
                "invalid_request",
                `Too many failed token requests ${what}; try again in ${retryAfterSeconds} seconds.`,
                "Wait for the number of seconds in Retry-After, then retry with correct client credentials.",
                {
                  code: "rate_limited",
                  reason: `blocked ${what}`,
                  headers: {
                    "retry-after": String(retryAfterSeconds),
                    "ratelimit-policy": `"${policy}";q=${limit};w=${limiter.windowSeconds}`,
                    ratelimit: `"${policy}";r=0;t=${retryAfterSeconds}`
                  }
                }
              )
            }

            const address = input.clientIp
            const addressBlock = yield* limiter.addressBlocked(address)
            if (addressBlock !== undefined) return rateLimited(addressBlock)

            if (isEncoded(input.contentEncoding)) {
              return badRequest(
                "Content-Encoding is not supported on this endpoint.",
                "Send the form uncompressed, without a Content-Encoding header.",
                "content encoding"
              )
            }
            if (!isFormContentType(input.contentType)) {
              return badRequest(
                "The request body must be application/x-www-form-urlencoded (UTF-8).",
                "Send grant_type=client_credentials as a form-encoded body with Content-Type application/x-www-form-urlencoded.",
                "content type"
              )
            }
            const parsed = parseTokenForm(input.body)
            if (parsed._tag === "Bad") {
              return badRequest(parsed.description, "Send each parameter once, form-encoded (RFC 6749 Appendix B).", "form")
            }
            const { form } = parsed

            const credentials = parseBasicAuthorization(input.authorization)
            let attempt: Attempt
            switch (credentials._tag) {
              case "Absent": {
                if (form.clientAssertion !== undefined || form.clientAssertionType !== undefined) {
                  if (form.bodyCredentials.includes("client_secret")) {
                    return badRequest(
                      "Use one client authentication method: remove client_secret from the body.",
                      "Send the client assertion alone (client_assertion_type and client_assertion).",
                      "two auth methods"
                    )
                  }
                  const assertion = {
                    assertionType: form.clientAssertionType,
                    assertion: form.clientAssertion,
                    clientId: form.clientId
                  }
                  attempt = {
                    method: "private_key_jwt",
                    claimed: claimedClient(assertion),
                    check: assertions.authenticate(assertion),
                    resolution: CHECK_ASSERTION,
                    challenge: BASIC_CHALLENGE
                  }
                  break
                }
                const inBody = form.bodyCredentials.length > 0
                return fail(
                  401,
                  "invalid_client",
                  inBody
                    ? "Client credentials in the request body are not supported; use HTTP Basic authentication or a client assertion."
                    : "Client authentication is required.",
                  AUTHENTICATE_WITH_BASIC,
                  { reason: inBody ? "body credentials only" : "no credentials", headers: { "www-authenticate": BASIC_CHALLENGE } }
                )
              }
              case "OtherScheme":
                yield* limiter.recordFailure(address)
                return fail(401, "invalid_client", "Only HTTP Basic client authentication is supported.", AUTHENTICATE_WITH_BASIC, {
                  reason: "other scheme",
                  headers: { "www-authenticate": BASIC_CHALLENGE_INVALID_CLIENT }
                })
              case "Malformed":
                yield* limiter.recordFailure(address)
                return badRequest(
                  credentials.description,
                  "Send Authorization: Basic base64(form-encoded client id + ':' + form-encoded secret).",
                  "malformed basic"
                )
              case "Basic": {
                if (form.clientId !== undefined && form.clientId !== credentials.clientId) {
                  return badRequest(
                    "The client_id parameter names another client than the Basic credentials.",
                    "Remove client_id from the body, or send the id of the client that authenticates.",
                    "client_id mismatch"
                  )
                }
                const otherCredentials = form.bodyCredentials.filter((name) => name !== "client_id")
                if (otherCredentials.length > 0) {
                  return badRequest(
                    `Use one client authentication method: remove ${otherCredentials.join(", ")} from the body.`,
                    "Send the client credentials only in the Authorization header.",
                    "two auth methods"
                  )
                }
                attempt = {
                  method: "client_secret_basic",
                  claimed: credentials.clientId,
                  check: registry.authenticate(credentials.clientId, credentials.secret),
                  resolution: CHECK_SECRET,
                  challenge: BASIC_CHALLENGE_INVALID_CLIENT
                }
              }
            }

            if (attempt.claimed !== undefined) {
              const clientBlock = yield* limiter.clientBlocked(address, attempt.claimed)
              if (clientBlock !== undefined) return rateLimited(clientBlock)
            }

            if (form.grantType === undefined) {
              return badRequest("The grant_type parameter is required.", "Send grant_type=client_credentials.", "no grant_type")
            }
            if (form.grantType !== "client_credentials") {
              return fail(400, "unsupported_grant_type", "Only the client_credentials grant is supported.", "Send grant_type=client_credentials.", {
                reason: "grant type"
              })
            }

            const authenticated = yield* Effect.result(attempt.check)
            if (authenticated._tag === "Failure") {
              yield* limiter.recordFailure(address, attempt.claimed)
              // The caller learns nothing of why; the operator helping an integrator does (never the assertion itself).
              if (attempt.method === "private_key_jwt") {
                yield* Effect.logInfo("oauth: client assertion refused").pipe(Effect.annotateLogs({
                  reason: authenticated.failure.reason,
                  clientId: attempt.claimed?.slice(0, 256) ?? null,
                  clientIp: address
                }))
              }
              return fail(401, "invalid_client", "Client authentication failed.", attempt.resolution, {
                reason: authenticated.failure.reason,
                headers: { "www-authenticate": attempt.challenge }
              })
            }
            const client = authenticated.success

            const granted = grantedScopes(client, form.scope)
            if (granted._tag === "Refused") {
              return fail(
                400,
                "invalid_scope",
                granted.description,
                `Request a space-separated subset of this client's scopes: ${client.scopes.join(" ")}.`,
                { reason: granted.reason }
              )
            }

            const issued = yield* tokens.issue(client, granted.scopes)
            return issuedResponse({
              access_token: issued.accessToken,
              token_type: "Bearer",
              expires_in: issued.expiresIn,
              scope: issued.scope
            }, client.clientId)
          })

        return { handle }
      })
    )
}

/** §3.3: no scope asks for all of the client's scopes; otherwise a well-formed subset of them. */
const grantedScopes = (
  client: OAuthClient,
  requested: string | undefined
):
  | { readonly _tag: "Granted"; readonly scopes: ReadonlyArray<Scope> }
  | { readonly _tag: "Refused"; readonly description: string; readonly reason: string } =>
{
  if (requested === undefined) return { _tag: "Granted", scopes: client.scopes }
  const parsed = parseScopeString(requested)
  if (parsed._tag === "Malformed") {
    return { _tag: "Refused", description: "The scope parameter is malformed (scopes separated by single spaces).", reason: "malformed scope" }
  }
  if (parsed._tag === "Unknown") {
    return { _tag: "Refused", description: `Unknown scope: ${parsed.tokens.join(" ")}.`, reason: "unknown scope" }
  }
  const allowed = new Set<string>(client.scopes)
  const notAllowed = parsed.scopes.filter((s) => !allowed.has(s))
  if (notAllowed.length > 0) {
    return { _tag: "Refused", description: `This client may not request: ${notAllowed.join(" ")}.`, reason: "scope not allowed" }
  }
  return { _tag: "Granted", scopes: parsed.scopes }
}
