/**
 * The token endpoint's answers (CONTRACT C6, RFC 6749 §5): exact status, headers and JSON text. Error
 * bodies carry the OAuth members and the problem members (`type` = PUBLIC_BASE_URL/problems/<code>) in one
 * `application/json` object; oauth4webapi rejects `application/problem+json` on this endpoint. Every
 * error of /oauth/token takes this form, the HTTP layer's refusals (405, 413) included: contract
 * knowledge, beside the problem classes; src/http/problemResponse.ts makes an answer a response.
 */
import { ProblemCatalogue, problemTypePath } from "./problems.ts"
import type { OAuthErrorBody, TokenResponse } from "./schemas.ts"

export type TokenSuccessBody = typeof TokenResponse.Type
export type TokenErrorBody = typeof OAuthErrorBody.Type

/**
 * Refusals RFC 6749 has no `error` code for: the body says `invalid_request`, the problem `code` and
 * `type` say which (the one place where `code` differs from `error`).
 */
type RefusalCode = "method_not_allowed" | "payload_too_large" | "unsupported_media_type" | "rate_limited"

/** Fixed problem titles per code; the /problems/<code> pages use the same. */
export const TokenErrorTitles = {
  invalid_request: "Invalid token request",
  invalid_client: "Client authentication failed",
  unsupported_grant_type: "Unsupported grant type",
  invalid_scope: "Invalid scope",
  method_not_allowed: ProblemCatalogue.method_not_allowed.title,
  payload_too_large: ProblemCatalogue.payload_too_large.title,
  unsupported_media_type: ProblemCatalogue.unsupported_media_type.title,
  rate_limited: ProblemCatalogue.rate_limited.title
} as const

/** The RFC 6749 `error` codes this endpoint answers. */
export type TokenErrorCode = Exclude<keyof typeof TokenErrorTitles, RefusalCode>

export interface TokenEndpointResponse {
  readonly status: 200 | 400 | 401 | 405 | 413 | 415 | 429
  /** Lower-case names. Always content-type, cache-control, pragma; plus www-authenticate / retry-after. */
  readonly headers: Readonly<Record<string, string>>
  /** The JSON text to send, byte for byte. */
  readonly body: string
  /** The same body as an object (for tests and typed handlers). */
  readonly json: TokenSuccessBody | TokenErrorBody
  /** For access logs and metrics; never contains a secret or a token. */
  readonly outcome: {
    readonly result: "issued" | TokenErrorCode | RefusalCode
    readonly reason: string
    readonly clientId?: string
  }
}

const BASIC_REALM = "oauth"
/** 401 when the request carried no Basic credentials (RFC 9110 §15.5.2: every 401 has a challenge). */
export const BASIC_CHALLENGE = `Basic realm="${BASIC_REALM}"`
/** 401 when Basic credentials were sent and rejected (RFC 6749 §5.2). */
export const BASIC_CHALLENGE_INVALID_CLIENT = `Basic realm="${BASIC_REALM}", error="invalid_client"`

/** RFC 6749 §5.2: error_description is limited to %x20-21 / %x23-5B / %x5D-7E. */
const oauthSafeText = (text: string): string => text.replace(/[^\x20\x21\x23-\x5B\x5D-\x7E]/g, "?")

/** RFC 6749 §5.1: token answers, errors included, are never cached. */
const BASE_HEADERS = {
  "content-type": "application/json",
  "cache-control": "no-store",
  pragma: "no-cache"
} as const

export const issuedResponse = (json: TokenSuccessBody, clientId: string): TokenEndpointResponse => ({
  status: 200,
  headers: BASE_HEADERS,
  body: JSON.stringify(json),
  json,
  outcome: { result: "issued", reason: "ok", clientId }
})

export interface ErrorOptions {
  /** When the problem `code` differs from the OAuth `error`. */
  readonly code?: RefusalCode
  readonly headers?: Readonly<Record<string, string>>
  /** For the access log only. */
  readonly reason: string
}

export const errorResponse = (
  context: { readonly publicBaseUrl: string; readonly requestId?: string | undefined },
  status: TokenEndpointResponse["status"],
  error: TokenErrorCode,
  description: string,
  resolution: string,
  options: ErrorOptions
): TokenEndpointResponse => {
  const code = options.code ?? error
  const safe = oauthSafeText(description)
  const json: TokenErrorBody = {
    error,
    error_description: safe,
    type: context.publicBaseUrl + problemTypePath(code),
    title: TokenErrorTitles[code],
    status,
    detail: safe,
    code,
    resolution,
    ...(context.requestId === undefined ? {} : { instance: `urn:uuid:${context.requestId}` })
  }
  return {
    status,
    headers: { ...BASE_HEADERS, ...options.headers },
    body: JSON.stringify(json),
    json,
    outcome: { result: code, reason: options.reason }
  }
}

const refusals = {
  method_not_allowed: { status: 405, resolution: "Send POST with a form-encoded body: grant_type=client_credentials." },
  payload_too_large: { status: 413, resolution: "Send the form in at most 16 KiB." },
  unsupported_media_type: { status: 415, resolution: "Send the form as application/x-www-form-urlencoded, uncompressed." }
} as const

/**
 * What the HTTP layer refuses before the endpoint reads the request (405, 413, 415), in this
 * endpoint's error form: OAuth clients read `error` of every answer that is not a token.
 */
export const refusalResponse = (
  context: { readonly publicBaseUrl: string; readonly requestId?: string | undefined },
  code: keyof typeof refusals,
  detail?: string
): TokenEndpointResponse => {
  const { resolution, status } = refusals[code]
  return errorResponse(context, status, "invalid_request", detail ?? ProblemCatalogue[code].detail, resolution, { code, reason: code })
}
