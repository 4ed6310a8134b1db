/**
 * Every error of the API as an RFC 9457 problem class (CONTRACT C7). One class per `code`, so the
 * OpenAPI document, the typed client and the handlers all speak the same vocabulary.
 *
 * `type` is declared relative (`/problems/<code>`): the contract cannot know the deployment's
 * PUBLIC_BASE_URL. The server makes it absolute on the wire and the typed client makes it relative
 * again before decoding (see src/client.ts).
 */
import { Effect, Schema } from "effect"
import { HttpApiError } from "effect/http-api"

/** One failed member of a request: a JSON Pointer into the body and what is wrong there. */
export const ProblemFieldError = Schema.Struct({
  pointer: Schema.String.annotate({ description: "JSON Pointer (RFC 6901) to the offending member" }),
  detail: Schema.String
})
export type ProblemFieldError = typeof ProblemFieldError.Type

export interface ProblemInfo {
  readonly code: string
  readonly status: number
  readonly title: string
  readonly resolution: string
  readonly detail: string
}

const info = (code: string, status: number, title: string, resolution: string, detail: string): ProblemInfo => ({
  code,
  status,
  title,
  resolution,
  detail
})

/** The catalogue: fixed title, default detail and resolution per code. It also feeds /problems/{code}. */
export const ProblemCatalogue = {
  malformed_json: info(
    "malformed_json",
    400,
    "Malformed JSON",
    "Send a syntactically valid JSON document as the request body.",
    "The request body is not valid JSON."
  ),
  validation_failed: info(
    "validation_failed",
    400,
    "Validation failed",
    "Correct the members listed in `errors` and send the request again.",
    "The request body does not match the schema."
  ),
  no_valid_symbols: info(
    "no_valid_symbols",
    400,
    "No valid symbols",
    "Send at least one cryptocurrency symbol that the service knows, such as BTC or ETH.",
    "None of the requested symbols is a known cryptocurrency."
  ),
  invalid_email: info(
    "invalid_email",
    400,
    "Invalid e-mail address",
    "Check the e-mail address for typing mistakes and use an address that can receive mail.",
    "The newsletter provider rejected the e-mail address."
  ),
  invalid_token: info(
    "invalid_token",
    401,
    "Invalid access token",
    "Obtain a new access token from POST /oauth/token, or call the operation without Authorization.",
    "The access token is malformed, expired, revoked or not issued by this server."
  ),
  insufficient_scope: info(
    "insufficient_scope",
    403,
    "Insufficient scope",
    "Request a token with the scope named in the WWW-Authenticate header.",
    "The access token does not carry the scope this operation requires."
  ),
  not_found: info(
    "not_found",
    404,
    "Not found",
    "Check the path against the API reference at /docs.",
    "No resource exists at this path."
  ),
  method_not_allowed: info(
    "method_not_allowed",
    405,
    "Method not allowed",
    "Use one of the methods listed in the Allow header.",
    "The method is not supported on this path."
  ),
  payload_too_large: info(
    "payload_too_large",
    413,
    "Payload too large",
    "Send a request body of at most 16 KiB.",
    "The request body exceeds 16 KiB."
  ),
  unsupported_media_type: info(
    "unsupported_media_type",
    415,
    "Unsupported media type",
    "Send the body as application/json with a Content-Type header saying so.",
    "The request body must be application/json."
  ),
  rate_limited: info(
    "rate_limited",
    429,
    "Too many requests",
    "Wait for the number of seconds in Retry-After before retrying, or use an access token for a higher limit.",
    "The rate limit for this operation has been reached."
  ),
  internal_error: info(
    "internal_error",
    500,
    "Internal server error",
    "Retry later; if it persists, contact support quoting the instance URN.",
    "The server could not complete the request."
  ),
  upstream_error: info(
    "upstream_error",
    502,
    "Upstream service error",
    "Retry later; the failure is on a provider the service depends on.",
    "An upstream service failed to answer correctly."
  ),
  service_unavailable: info(
    "service_unavailable",
    503,
    "Service unavailable",
    "Wait for the number of seconds in Retry-After before retrying.",
    "A required service is temporarily unavailable."
  )
} as const satisfies Record<string, ProblemInfo>

export type ProblemCode = keyof typeof ProblemCatalogue
export const problemCodes = Object.keys(ProblemCatalogue) as ReadonlyArray<ProblemCode>

/**
 * What a problem of each code says on the wire beyond the catalogue's defaults, for the examples of the
 * OpenAPI document (src/http/documents.ts builds them, absolute `type` and `instance` included).
 */
export const ProblemExamples: { readonly [C in ProblemCode]?: { readonly detail?: string; readonly [member: string]: unknown } } = {
  validation_failed: {
    detail: "/cryptos/1: Expected a string matching the RegExp ^[A-Za-z0-9._-]+$",
    errors: [
      { pointer: "/cryptos/1", detail: "Expected a string matching the RegExp ^[A-Za-z0-9._-]+$" },
      { pointer: "/days", detail: "Expected a value between 1 and 365" }
    ]
  },
  no_valid_symbols: { detail: "None of the requested symbols is known: NOPECOIN.", unknown: ["NOPECOIN"] },
  insufficient_scope: { detail: "This operation requires the scope rates:read.", scope: "rates:read" },
  not_found: { detail: "No resource exists at /api/v2/exchange-rates." },
  method_not_allowed: { detail: "DELETE is not supported on this path." },
  rate_limited: { retryAfter: 42 },
  service_unavailable: { retryAfter: 5 }
}
export const problemTypePath = (code: string) => `/problems/${code}`

/** The fields every problem adds to RFC 9457: `detail` required, `code` fixed, `resolution`. */
const fieldsOf = <const C extends ProblemCode>(code: C) => {
  const p = ProblemCatalogue[code]
  return {
    detail: Schema.String.pipe(Schema.withConstructorDefault(Effect.succeed(p.detail))),
    code: Schema.tag(code),
    resolution: Schema.String.pipe(Schema.withConstructorDefault(Effect.succeed(p.resolution)))
  }
}
const declarationOf = <const C extends ProblemCode>(code: C) => {
  const p = ProblemCatalogue[code]
  return { type: `/problems/${code}` as `/problems/${C}`, status: p.status as (typeof ProblemCatalogue)[C]["status"], title: p.title }
}
const fieldErrors = { errors: Schema.optionalKey(Schema.Array(ProblemFieldError)) }

export class MalformedJson extends HttpApiError.Problem<MalformedJson>()(
  "MalformedJson",
  declarationOf("malformed_json"),
  fieldsOf("malformed_json")
) {}
export class ValidationFailed extends HttpApiError.Problem<ValidationFailed>()(
  "ValidationFailed",
  declarationOf("validation_failed"),
  { ...fieldsOf("validation_failed"), ...fieldErrors }
) {}
export class NoValidSymbols extends HttpApiError.Problem<NoValidSymbols>()(
  "NoValidSymbols",
  declarationOf("no_valid_symbols"),
  { ...fieldsOf("no_valid_symbols"), unknown: Schema.Array(Schema.String) }
) {}
export class InvalidEmail extends HttpApiError.Problem<InvalidEmail>()(
  "InvalidEmail",
  declarationOf("invalid_email"),
  { ...fieldsOf("invalid_email"), ...fieldErrors }
) {}
export class InvalidToken extends HttpApiError.Problem<InvalidToken>()(
  "InvalidToken",
  declarationOf("invalid_token"),
  fieldsOf("invalid_token")
) {}
export class InsufficientScope extends HttpApiError.Problem<InsufficientScope>()(
  "InsufficientScope",
  declarationOf("insufficient_scope"),
  { ...fieldsOf("insufficient_scope"), scope: Schema.optionalKey(Schema.String) }
) {}
export class NotFound extends HttpApiError.Problem<NotFound>()(
  "NotFound",
  declarationOf("not_found"),
  fieldsOf("not_found")
) {}
export class MethodNotAllowed extends HttpApiError.Problem<MethodNotAllowed>()(
  "MethodNotAllowed",
  declarationOf("method_not_allowed"),
  fieldsOf("method_not_allowed")
) {}
export class PayloadTooLarge extends HttpApiError.Problem<PayloadTooLarge>()(
  "PayloadTooLarge",
  declarationOf("payload_too_large"),
  fieldsOf("payload_too_large")
) {}
export class UnsupportedMediaType extends HttpApiError.Problem<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  declarationOf("unsupported_media_type"),
  fieldsOf("unsupported_media_type")
) {}
/** Seconds until a retry can succeed; the server also sends it as the Retry-After header. */
const retryAfter = {
  retryAfter: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
}

export class RateLimited extends HttpApiError.Problem<RateLimited>()(
  "RateLimited",
  declarationOf("rate_limited"),
  { ...fieldsOf("rate_limited"), ...retryAfter }
) {}
export class InternalError extends HttpApiError.Problem<InternalError>()(
  "InternalError",
  declarationOf("internal_error"),
  fieldsOf("internal_error")
) {}
export class UpstreamError extends HttpApiError.Problem<UpstreamError>()(
  "UpstreamError",
  declarationOf("upstream_error"),
  fieldsOf("upstream_error")
) {}
export class ServiceUnavailable extends HttpApiError.Problem<ServiceUnavailable>()(
  "ServiceUnavailable",
  declarationOf("service_unavailable"),
  { ...fieldsOf("service_unavailable"), ...retryAfter }
) {}
