/**
 * Rendering problems on the wire (CONTRACT C7). Handlers fail with the typed classes of
 * src/api/problems.ts; this module finishes every problem body the same way whoever produced it:
 * absolute `type`, `instance` from the request id, and the headers the status calls for.
 */
import { HttpServerResponse } from "effect/http"
import { type ProblemCode, ProblemCatalogue, problemTypePath } from "../api/problems.ts"

export const problemContentType = "application/problem+json"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export interface ProblemContext {
  readonly baseUrl: string
  readonly requestId: string
}

/** A problem body for a code of the catalogue, with the C7 members in a stable order. */
export const problemBody = (
  code: ProblemCode,
  ctx: ProblemContext,
  extra: { readonly detail?: string; readonly [member: string]: unknown } = {}
): Record<string, unknown> => {
  const p = ProblemCatalogue[code]
  return {
    type: ctx.baseUrl + problemTypePath(code),
    title: p.title,
    status: p.status,
    detail: p.detail,
    instance: `urn:uuid:${ctx.requestId}`,
    code,
    resolution: p.resolution,
    ...extra
  }
}

export const problemResponse = (
  code: ProblemCode,
  ctx: ProblemContext,
  extra?: { readonly detail?: string; readonly [member: string]: unknown }
): HttpServerResponse.HttpServerResponse => finishProblem(problemBody(code, ctx, extra), ProblemCatalogue[code].status)

/** Headers that follow from a problem's status and members (RFC 9110 §15.5.2, RFC 6750 §3, C8). */
const challengeFor = (body: Record<string, unknown>): Record<string, string> => {
  const headers: Record<string, string> = { "cache-control": "no-store" }
  if (typeof body.retryAfter === "number") headers["retry-after"] = String(body.retryAfter)
  if (body.code === "invalid_token") {
    headers["www-authenticate"] = `Bearer realm="api", error="invalid_token"`
  } else if (body.code === "insufficient_scope") {
    const scope = typeof body.scope === "string" ? `, scope="${body.scope}"` : ""
    headers["www-authenticate"] = `Bearer realm="api", error="insufficient_scope"${scope}`
  }
  return headers
}

/** Problems rendered here are complete; `completeProblem` leaves them as they are. */
const complete = new WeakSet<HttpServerResponse.HttpServerResponse>()

const finishProblem = (body: Record<string, unknown>, status: number) => {
  const response = HttpServerResponse.uint8Array(encoder.encode(JSON.stringify(body)), {
    status,
    contentType: problemContentType,
    headers: challengeFor(body)
  })
  complete.add(response)
  return response
}

/**
 * Completes a problem rendered by HttpApi from a typed class: its `type` is relative in the
 * contract and it has no `instance`. Other headers of the response are kept.
 */
export const completeProblem = (
  response: HttpServerResponse.HttpServerResponse,
  ctx: ProblemContext
): HttpServerResponse.HttpServerResponse => {
  if (complete.has(response) || response.body._tag !== "Uint8Array") return response
  let body: Record<string, unknown>
  try {
    body = JSON.parse(decoder.decode(response.body.body))
  } catch {
    return response
  }
  if (typeof body !== "object" || body === null) return response
  // Canonical member order; status and instance are the edge's, whatever the body said.
  const { type, title, detail, code, resolution, status: _status, instance: _instance, ...extensions } = body
  const finished = finishProblem({
    type: typeof type === "string" && type.startsWith("/problems/") ? ctx.baseUrl + type : type,
    title,
    status: response.status,
    detail,
    instance: `urn:uuid:${ctx.requestId}`,
    code,
    resolution,
    ...extensions
  }, response.status)
  return HttpServerResponse.setHeaders(finished, { ...response.headers, ...finished.headers })
}

export const isProblemResponse = (response: HttpServerResponse.HttpServerResponse) => {
  const contentType = response.headers["content-type"] ??
    (response.body._tag === "Uint8Array" ? response.body.contentType : undefined)
  return contentType !== undefined && contentType.startsWith(problemContentType)
}

export const isJsonResponse = (response: HttpServerResponse.HttpServerResponse) => {
  const contentType = response.headers["content-type"] ??
    ("contentType" in response.body ? response.body.contentType : undefined)
  return contentType !== undefined && /^application\/(problem\+)?json/.test(contentType)
}
