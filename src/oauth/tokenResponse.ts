/**
 * The token endpoint's answers (CONTRACT C6, RFC 6749 §5): exact status, headers and JSON text. Error
 * bodies carry the OAuth members and the problem members (`type` = PUBLIC_BASE_URL/problems/<code>) in one
 * `application/json` object; oauth4webapi rejects `application/problem+json` on this endpoint.
 */
import { problemTypePath } from "../api/problems.ts"
import type { OAuthErrorBody, TokenResponse } from "../api/schemas.ts"

export type TokenSuccessBody = typeof TokenResponse.Type
export type TokenErrorBody = typeof OAuthErrorBody.Type

/** Fixed problem titles per code; the /problems/<code> pages use the same. */
export const TokenErrorTitles = {
  invalid_request: "Invalid token request",
  invalid_client: "Client authentication failed",
  unsupported_grant_type: "Unsupported grant type",
  invalid_scope: "Invalid scope",
  rate_limited: "Too many requests"
} as const

/** The RFC 6749 `error` codes this endpoint answers. */
export type TokenErrorCode = Exclude<keyof typeof TokenErrorTitles, "rate_limited">

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

export const BASIC_REALM = "oauth"
/** 401 when the request carried no Basic credentials (RFC 9110 §15.5.2: every 401 has a challenge). */
export const BASIC_CHALLENGE = `Basic realm="${BASIC_REALM}"`
/** 401 when Basic credentials were sent and rejected (RFC 6749 §5.2). */
export const BASIC_CHALLENGE_INVALID_CLIENT = `Basic realm="${BASIC_REALM}", error="invalid_client"`

/** RFC 6749 §5.2: error_description is limited to %x20-21 / %x23-5B / %x5D-7E. */
export const oauthSafeText = (text: string): string => text.replace(/[^\x20\x21\x23-\x5B\x5D-\x7E]/g, "?")

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
  /** `rate_limited`: the one case where the problem `code` differs from the OAuth `error`. */
  readonly code?: "rate_limited"
  readonly headers?: Readonly<Record<string, string>>
  /** For the access log only. */
  readonly reason: string
}

export const errorResponse = (
  context: { readonly publicBaseUrl: string; readonly requestId?: string | undefined },
  status: 400 | 401 | 429,
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
