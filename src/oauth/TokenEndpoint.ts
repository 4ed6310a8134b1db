/**
 * POST /oauth/token, independent of the HTTP framework (CONTRACT C6, RFC 6749 §2.3.1, §3.2, §4.4, §5).
 * The route hands over the raw Authorization and Content-Type headers, the raw body and the client
 * address, and sends back exactly the status, headers and JSON body returned here.
 *
 * Decisions (documented for the API reference):
 * - Only `client_secret_basic`. Credentials in the body (`client_id`, `client_secret`,
 *   `client_assertion*`) next to Basic → 400 invalid_request (one method per request, §2.3); body
 *   credentials alone → 401 invalid_client (unsupported method).
 * - A body that is not `application/x-www-form-urlencoded` (charset, if given, must be UTF-8) → 400
 *   invalid_request with an `application/json` body, not 415: OAuth clients only parse RFC 6749 errors.
 * - `scope` absent or empty → every scope the client is registered for. Unknown, not allowed or
 *   malformed (RFC 6749 §3.3 syntax) → 400 invalid_scope. The granted `scope` is always echoed.
 * - A parameter the endpoint reads (grant_type, scope, client_id, client_secret, client_assertion,
 *   client_assertion_type) given twice with a value → 400 invalid_request; empty values count as absent;
 *   other parameters are ignored (§3.2).
 * - Rate limiting: failed client authentications (and malformed Basic credentials) count per client
 *   address (IPv6 per /64) and per client id; at `OAUTH_MAX_FAILURES_PER_MIN` within 60 s further
 *   requests get 429 with `Retry-After` until the window frees. RFC 6749 has no error code for this and
 *   an invented one would break clients, so the body says `"error": "invalid_request"` with problem
 *   `code`/`type` `rate_limited` (the one place where `code` differs from `error`). Counting per client id
 *   also lets a stranger lock a client out for a minute: the accepted price of stopping distributed guessing.
 * - Error bodies carry the OAuth members and the problem members (`type` = PUBLIC_BASE_URL/problems/<code>)
 *   in one `application/json` object; oauth4webapi rejects `application/problem+json` on this endpoint.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { ClientRegistry } from "./ClientRegistry.ts"
import { FailureLimiter, ipKey, type LimitStatus } from "./FailureLimiter.ts"
import { parseScopeString, type Scope } from "./scopes.ts"
import { TokenService } from "./TokenService.ts"

export interface TokenRequestInput {
  /** The raw `Authorization` header, if any. */
  readonly authorization: string | undefined
  /** The raw `Content-Type` header, if any. */
  readonly contentType: string | undefined
  /** The raw request body (already size-limited by the HTTP layer). */
  readonly body: string
  /** The caller's address as the HTTP layer determined it (TRUST_PROXY aware). */
  readonly clientIp: string
  /** When given, error bodies get `instance: "urn:uuid:<requestId>"` like every other problem (C7). */
  readonly requestId?: string | undefined
}

export type TokenErrorCode = "invalid_request" | "invalid_client" | "unsupported_grant_type" | "invalid_scope"

export interface TokenSuccessBody {
  readonly access_token: string
  readonly token_type: "Bearer"
  readonly expires_in: number
  readonly scope: string
}

export interface TokenErrorBody {
  readonly error: TokenErrorCode
  readonly error_description: string
  readonly type: string
  readonly title: string
  readonly status: number
  readonly detail: string
  readonly code: TokenErrorCode | "rate_limited"
  readonly resolution: string
  readonly instance?: string
}

export interface TokenEndpointResponse {
  readonly status: 200 | 400 | 401 | 429
  /** Lower-case names. Always content-type, cache-control, pragma; plus www-authenticate / retry-after. */
  readonly headers: Readonly<Record<string, string>>
  /** The JSON text to send, byte for byte. */
  readonly body: string
  /** The same body as an object (for tests and typed handlers). */
  readonly json: TokenSuccessBody | TokenErrorBody
  /** For access logs and metrics; never contains a secret or a token. */
  readonly outcome: {
    readonly result: "issued" | TokenErrorCode | "rate_limited"
    readonly reason: string
    readonly clientId?: string
  }
}

export interface TokenEndpointShape {
  readonly handle: (input: TokenRequestInput) => Effect.Effect<TokenEndpointResponse>
}

export const BASIC_REALM = "oauth"
/** 401 when the request carried no Basic credentials (RFC 9110 §15.5.2: every 401 has a challenge). */
export const BASIC_CHALLENGE = `Basic realm="${BASIC_REALM}"`
/** 401 when Basic credentials were sent and rejected (RFC 6749 §5.2). */
export const BASIC_CHALLENGE_INVALID_CLIENT = `Basic realm="${BASIC_REALM}", error="invalid_client"`

/** Fixed problem titles per code; the /problems/<code> pages should use the same. */
export const TokenErrorTitles = {
  invalid_request: "Invalid token request",
  invalid_client: "Client authentication failed",
  unsupported_grant_type: "Unsupported grant type",
  invalid_scope: "Invalid scope",
  rate_limited: "Too many requests"
} as const

/** RFC 6749 §5.2: error_description is limited to %x20-21 / %x23-5B / %x5D-7E. */
export const oauthSafeText = (text: string): string => text.replace(/[^\x20\x21\x23-\x5B\x5D-\x7E]/g, "?")

/** Form decoding of one name or value (RFC 6749 App. B): `+` is a space, then %XX as UTF-8. */
export const formDecode = (raw: string): string | undefined => {
  try {
    return decodeURIComponent(raw.replace(/\+/g, " "))
  } catch {
    return undefined // bad %-escape or bytes that are not UTF-8
  }
}

/** Parameters the endpoint interprets; a repeat of one of them is an error, of others is ignored. */
const KNOWN_PARAMETERS = ["grant_type", "scope", "client_id", "client_secret", "client_assertion", "client_assertion_type"]
const BODY_CREDENTIALS = ["client_id", "client_secret", "client_assertion", "client_assertion_type"]

type FormParse =
  | { readonly _tag: "Ok"; readonly get: (name: string) => string | undefined }
  | { readonly _tag: "Bad"; readonly description: string }

export const parseTokenForm = (body: string): FormParse => {
  const values = new Map<string, Array<string>>()
  for (const pair of body.split("&")) {
    if (pair === "") continue
    const eq = pair.indexOf("=")
    const name = formDecode(eq < 0 ? pair : pair.slice(0, eq))
    const value = formDecode(eq < 0 ? "" : pair.slice(eq + 1))
    if (name === undefined || value === undefined) {
      return { _tag: "Bad", description: "The request body contains a malformed percent-encoding." }
    }
    // RFC 6749 §3.2: a parameter sent without a value is treated as omitted.
    if (value === "") continue
    const list = values.get(name)
    if (list === undefined) values.set(name, [value])
    else list.push(value)
  }
  for (const name of KNOWN_PARAMETERS) {
    if ((values.get(name)?.length ?? 0) > 1) {
      return { _tag: "Bad", description: `The ${name} parameter is repeated; send it at most once.` }
    }
  }
  return { _tag: "Ok", get: (name) => values.get(name)?.[0] }
}

export type BasicCredentials =
  | { readonly _tag: "Absent" }
  | { readonly _tag: "OtherScheme" }
  | { readonly _tag: "Malformed"; readonly description: string }
  | { readonly _tag: "Basic"; readonly clientId: string; readonly secret: Redacted.Redacted<string> }

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/
const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * RFC 6749 §2.3.1 / RFC 7617: base64-decode, split at the first `:`, form-urldecode each half. Any
 * deviation is malformed (400 invalid_request), not an authentication failure.
 */
export const parseBasicAuthorization = (header: string | undefined): BasicCredentials => {
  if (header === undefined || header.trim() === "") return { _tag: "Absent" }
  const match = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?: +(.*))?$/.exec(header.trim())
  if (match === null) return { _tag: "Malformed", description: "The Authorization header is malformed." }
  if (match[1]!.toLowerCase() !== "basic") return { _tag: "OtherScheme" }
  const encoded = match[2]?.trim() ?? ""
  const malformed = (description: string): BasicCredentials => ({ _tag: "Malformed", description })
  if (encoded === "" || !BASE64.test(encoded) || encoded.length % 4 === 1 || (encoded.includes("=") && encoded.length % 4 !== 0)) {
    return malformed("The Basic credentials are not valid base64.")
  }
  let decoded: string
  try {
    decoded = utf8.decode(Buffer.from(encoded, "base64"))
  } catch {
    return malformed("The Basic credentials are not valid UTF-8.")
  }
  const colon = decoded.indexOf(":")
  if (colon < 0) return malformed("The Basic credentials have no colon between client id and secret.")
  const clientId = formDecode(decoded.slice(0, colon))
  const secret = formDecode(decoded.slice(colon + 1))
  if (clientId === undefined || secret === undefined) {
    return malformed("The Basic credentials contain a malformed percent-encoding.")
  }
  if (clientId === "") return malformed("The Basic credentials have an empty client id.")
  return { _tag: "Basic", clientId, secret: Redacted.make(secret, { label: "client_secret" }) }
}

/** Media type `application/x-www-form-urlencoded`, case-insensitive; a charset parameter must be UTF-8. */
export const isFormContentType = (contentType: string | undefined): boolean => {
  if (contentType === undefined) return false
  const [type = "", ...parameters] = contentType.split(";")
  if (type.trim().toLowerCase() !== "application/x-www-form-urlencoded") return false
  return parameters.every((p) => {
    const eq = p.indexOf("=")
    if (eq < 0 || p.slice(0, eq).trim().toLowerCase() !== "charset") return true
    return p.slice(eq + 1).trim().replace(/^"|"$/g, "").toLowerCase() === "utf-8"
  })
}

const BASE_HEADERS = {
  "content-type": "application/json",
  "cache-control": "no-store",
  pragma: "no-cache"
} as const

export class TokenEndpoint extends Context.Service<TokenEndpoint, TokenEndpointShape>()("app/oauth/TokenEndpoint") {
  static readonly layer: Layer.Layer<TokenEndpoint, never, AppConfig | ClientRegistry | TokenService | FailureLimiter> =
    Layer.effect(
      TokenEndpoint,
      Effect.gen(function*() {
        const config = yield* AppConfig
        const registry = yield* ClientRegistry
        const tokens = yield* TokenService
        const limiter = yield* FailureLimiter

        const errorResponse = (
          input: TokenRequestInput,
          status: 400 | 401 | 429,
          error: TokenErrorCode,
          description: string,
          resolution: string,
          options: {
            readonly code?: "rate_limited"
            readonly headers?: Readonly<Record<string, string>>
            readonly reason: string
          }
        ): TokenEndpointResponse => {
          const code = options.code ?? error
          const safe = oauthSafeText(description)
          const json: TokenErrorBody = {
            error,
            error_description: safe,
            type: `${config.publicBaseUrl}/problems/${code}`,
            title: TokenErrorTitles[code],
            status,
            detail: safe,
            code,
            resolution,
            ...(input.requestId === undefined ? {} : { instance: `urn:uuid:${input.requestId}` })
          }
          return {
            status,
            headers: { ...BASE_HEADERS, ...options.headers },
            body: JSON.stringify(json),
            json,
            outcome: { result: code, reason: options.reason }
          }
        }

        const rateLimited = (input: TokenRequestInput, retryAfterSeconds: number, what: string) =>
          errorResponse(
            input,
            429,
            "invalid_request",
            `Too many failed token requests ${what}; try again in ${retryAfterSeconds} seconds.`,
            "Wait for the number of seconds in Retry-After, then retry with correct client credentials.",
            {
              code: "rate_limited",
              reason: `blocked ${what}`,
              headers: {
                "retry-after": String(retryAfterSeconds),
                "ratelimit-policy": `"oauth-failures";q=${limiter.limit};w=${limiter.windowSeconds}`,
                ratelimit: `"oauth-failures";r=0;t=${retryAfterSeconds}`
              }
            }
          )

        const blockedFor = (status: LimitStatus) => (status.blocked ? status.retryAfterSeconds : 0)

        const handle = (input: TokenRequestInput): Effect.Effect<TokenEndpointResponse> =>
          Effect.gen(function*() {
            const addressKey = ipKey(input.clientIp)
            const addressBlock = blockedFor(yield* limiter.status(addressKey))
            if (addressBlock > 0) return rateLimited(input, addressBlock, "from this address")

            const badRequest = (description: string, resolution: string, reason: string) =>
              errorResponse(input, 400, "invalid_request", description, resolution, { reason })

            if (!isFormContentType(input.contentType)) {
              return badRequest(
                "The request body must be application/x-www-form-urlencoded (UTF-8).",
                "Send grant_type=client_credentials as a form-encoded body with Content-Type application/x-www-form-urlencoded.",
                "content type"
              )
            }
            const form = parseTokenForm(input.body)
            if (form._tag === "Bad") {
              return badRequest(form.description, "Send each parameter once, form-encoded (RFC 6749 Appendix B).", "form")
            }

            const credentials = parseBasicAuthorization(input.authorization)
            const bodyCredentials = BODY_CREDENTIALS.filter((name) => form.get(name) !== undefined)
            switch (credentials._tag) {
              case "Absent":
                return errorResponse(
                  input,
                  401,
                  "invalid_client",
                  bodyCredentials.length > 0
                    ? "Client credentials in the request body are not supported; use HTTP Basic authentication."
                    : "Client authentication is required.",
                  "Authenticate with HTTP Basic: the form-encoded client id and secret (RFC 6749 section 2.3.1).",
                  { reason: bodyCredentials.length > 0 ? "body credentials only" : "no credentials", headers: { "www-authenticate": BASIC_CHALLENGE } }
                )
              case "OtherScheme":
                yield* limiter.recordFailure(addressKey)
                return errorResponse(
                  input,
                  401,
                  "invalid_client",
                  "Only HTTP Basic client authentication is supported.",
                  "Authenticate with HTTP Basic: the form-encoded client id and secret (RFC 6749 section 2.3.1).",
                  { reason: "other scheme", headers: { "www-authenticate": BASIC_CHALLENGE_INVALID_CLIENT } }
                )
              case "Malformed":
                yield* limiter.recordFailure(addressKey)
                return badRequest(
                  credentials.description,
                  "Send Authorization: Basic base64(form-encoded client id + ':' + form-encoded secret).",
                  "malformed basic"
                )
            }
            if (bodyCredentials.length > 0) {
              return badRequest(
                `Use one client authentication method: remove ${bodyCredentials.join(", ")} from the body.`,
                "Send the client credentials only in the Authorization header.",
                "two auth methods"
              )
            }

            const clientKey = `client:${credentials.clientId}`
            const clientBlock = blockedFor(yield* limiter.status(clientKey))
            if (clientBlock > 0) return rateLimited(input, clientBlock, "for this client")

            const grantType = form.get("grant_type")
            if (grantType === undefined) {
              return badRequest(
                "The grant_type parameter is required.",
                "Send grant_type=client_credentials.",
                "no grant_type"
              )
            }
            if (grantType !== "client_credentials") {
              return errorResponse(
                input,
                400,
                "unsupported_grant_type",
                "Only the client_credentials grant is supported.",
                "Send grant_type=client_credentials.",
                { reason: "grant type" }
              )
            }

            const authenticated = yield* Effect.result(registry.authenticate(credentials.clientId, credentials.secret))
            if (authenticated._tag === "Failure") {
              yield* limiter.recordFailure(addressKey)
              yield* limiter.recordFailure(clientKey)
              return errorResponse(
                input,
                401,
                "invalid_client",
                "Client authentication failed.",
                "Check the client id and secret; they are form-encoded before base64 (RFC 6749 section 2.3.1). Ask the operator if the client was revoked or its secret rotated.",
                { reason: authenticated.failure.reason, headers: { "www-authenticate": BASIC_CHALLENGE_INVALID_CLIENT } }
              )
            }
            const client = authenticated.success

            let granted: ReadonlyArray<Scope> = client.scopes
            const requested = form.get("scope")
            if (requested !== undefined) {
              const parsed = parseScopeString(requested)
              const allowed = new Set<string>(client.scopes)
              const invalidScope = (description: string, reason: string) =>
                errorResponse(
                  input,
                  400,
                  "invalid_scope",
                  description,
                  `Request a space-separated subset of this client's scopes: ${client.scopes.join(" ")}.`,
                  { reason }
                )
              if (parsed._tag === "Malformed") {
                return invalidScope("The scope parameter is malformed (scopes separated by single spaces).", "malformed scope")
              }
              if (parsed._tag === "Unknown") {
                return invalidScope(`Unknown scope: ${parsed.tokens.join(" ")}.`, "unknown scope")
              }
              const notAllowed = parsed.scopes.filter((s) => !allowed.has(s))
              if (notAllowed.length > 0) {
                return invalidScope(`This client may not request: ${notAllowed.join(" ")}.`, "scope not allowed")
              }
              granted = parsed.scopes
            }

            const issued = yield* tokens.issue(client, granted)
            const json: TokenSuccessBody = {
              access_token: issued.accessToken,
              token_type: "Bearer",
              expires_in: issued.expiresIn,
              scope: issued.scope
            }
            return {
              status: 200,
              headers: BASE_HEADERS,
              body: JSON.stringify(json),
              json,
              outcome: { result: "issued", reason: "ok", clientId: client.clientId }
            } satisfies TokenEndpointResponse
          })

        return { handle }
      })
    )
}
