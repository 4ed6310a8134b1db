/**
 * Rendering problems on the wire (CONTRACT C7). Handlers fail with the typed classes of
 * src/api/problems.ts; this module finishes every problem body the same way whoever produced it:
 * absolute `type`, `instance` from the request id, and the headers the status calls for.
 *
 * A problem of the catalogue is written from parts computed once per code and base URL (the text up
 * to `detail`, the default detail, the text after `instance`, the headers): the edge sends the text
 * as it is (`problemWire`), the HttpApi side wraps the same text in a response (`problemResponse`).
 */
import { HttpServerResponse } from "effect/http"
import { type ProblemCode, ProblemCatalogue, problemTypePath } from "../api/problems.ts"
import type { TokenEndpointResponse } from "../api/tokenResponse.ts"

export const problemContentType = "application/problem+json"

const decoder = new TextDecoder()

export interface ProblemContext {
  readonly baseUrl: string
  /** A UUID (requestId.ts): written into `instance` as it is. */
  readonly requestId: string
}

type Extra = { readonly detail?: string; readonly [member: string]: unknown }

/** A problem body for a code of the catalogue, with the C7 members in a stable order. */
const problemBody = (code: ProblemCode, ctx: ProblemContext, extra: Extra = {}): Record<string, unknown> => {
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

/** The fixed text of one code's problems: `head + detail + instance + requestId + tail + extensions + "}"`. */
interface ProblemParts {
  readonly status: number
  readonly head: string
  readonly detail: string
  readonly tail: string
  /** The challenge of a problem without `retryAfter` or `scope`, as name/value pairs. */
  readonly challenge: ReadonlyArray<string>
}

const instancePrefix = ",\"instance\":\"urn:uuid:"
const members = new Set(["type", "title", "status", "detail", "instance", "code", "resolution"])
const safeRequestId = /^[0-9A-Za-z-]*$/

const partsOf = (code: ProblemCode, baseUrl: string): ProblemParts => {
  const p = ProblemCatalogue[code]
  return {
    status: p.status,
    head: `{"type":${JSON.stringify(baseUrl + problemTypePath(code))},"title":${JSON.stringify(p.title)},"status":${p.status},"detail":`,
    detail: JSON.stringify(p.detail),
    tail: `","code":${JSON.stringify(code)},"resolution":${JSON.stringify(p.resolution)}`,
    challenge: Object.freeze(challengeFor(code, undefined, undefined))
  }
}

// One base URL per deployment (a few in tests).
const partsByBase = new Map<string, Map<ProblemCode, ProblemParts>>()
const partsFor = (code: ProblemCode, baseUrl: string): ProblemParts => {
  let byCode = partsByBase.get(baseUrl)
  if (byCode === undefined) partsByBase.set(baseUrl, byCode = new Map())
  let parts = byCode.get(code)
  if (parts === undefined) byCode.set(code, parts = partsOf(code, baseUrl))
  return parts
}

/**
 * The JSON text of `problemBody(code, ctx, extra)`, byte for byte: the parts, the detail and the
 * extension members. Anything that would not keep the members' order or presence as the object
 * spread and `JSON.stringify` do (an `undefined` member, a C7 member overridden, an integer-like
 * key) takes the general path.
 */
const problemText = (code: ProblemCode, ctx: ProblemContext, extra?: Extra): string => {
  const parts = partsFor(code, ctx.baseUrl)
  let detail = parts.detail
  let extensions = ""
  if (extra !== undefined) {
    for (const key of Object.keys(extra)) {
      const value = extra[key]
      if (key === "detail" && typeof value === "string") detail = JSON.stringify(value)
      else if (members.has(key) || !isJsonMember(value) || isIndexLike(key)) return JSON.stringify(problemBody(code, ctx, extra))
      else extensions += `,${JSON.stringify(key)}:${JSON.stringify(value)}`
    }
  }
  if (!safeRequestId.test(ctx.requestId)) return JSON.stringify(problemBody(code, ctx, extra))
  return parts.head + detail + instancePrefix + ctx.requestId + parts.tail + extensions + "}"
}

const isJsonMember = (value: unknown) => {
  const type = typeof value
  return type === "string" || type === "number" || type === "boolean" || (type === "object" && (value === null || !("toJSON" in (value as object))))
}
const isIndexLike = (key: string) => {
  const c = key.charCodeAt(0)
  return c >= 48 && c <= 57
}

/**
 * Headers that follow from a problem's code and members (RFC 9110 §15.5.2, RFC 6750 §3, C8), beyond
 * `cache-control: no-store`, which every problem carries: name/value pairs.
 */
const challengeFor = (code: unknown, retryAfter: unknown, scope: unknown): Array<string> => {
  const headers: Array<string> = []
  if (typeof retryAfter === "number") headers.push("retry-after", String(retryAfter))
  if (code === "invalid_token") {
    headers.push("www-authenticate", `Bearer realm="api", error="invalid_token"`)
  } else if (code === "insufficient_scope") {
    headers.push("www-authenticate", `Bearer realm="api", error="insufficient_scope"${typeof scope === "string" ? `, scope="${scope}"` : ""}`)
  }
  return headers
}

/** What the edge writes (`cache-control: no-store` is already among its headers), content headers aside. */
export interface ProblemWire {
  readonly status: number
  /** `retry-after`, `www-authenticate`: name/value pairs, shared (frozen) when the problem has none of its own. */
  readonly challenge: ReadonlyArray<string>
  readonly text: string
}

export const problemWire = (code: ProblemCode, ctx: ProblemContext, extra?: Extra): ProblemWire => {
  const parts = partsFor(code, ctx.baseUrl)
  return {
    status: parts.status,
    challenge: extra === undefined || (extra.retryAfter === undefined && extra.scope === undefined)
      ? parts.challenge
      : challengeFor(code, extra.retryAfter, extra.scope),
    text: problemText(code, ctx, extra)
  }
}

/** Problems rendered here are complete; `completeProblem` leaves them as they are. */
const complete = new WeakSet<HttpServerResponse.HttpServerResponse>()

const responseOf = (text: string, status: number, challenge: ReadonlyArray<string>) => {
  const headers: Record<string, string> = { "cache-control": "no-store" }
  for (let i = 0; i < challenge.length; i += 2) headers[challenge[i]!] = challenge[i + 1]!
  const response = HttpServerResponse.uint8Array(Buffer.from(text), { status, contentType: problemContentType, headers })
  complete.add(response)
  return response
}

/** The same problem as `problemWire`, as the HttpApi's response. */
export const problemResponse = (code: ProblemCode, ctx: ProblemContext, extra?: Extra): HttpServerResponse.HttpServerResponse => {
  const wire = problemWire(code, ctx, extra)
  return responseOf(wire.text, wire.status, wire.challenge)
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
  const finished = {
    type: typeof type === "string" && type.startsWith("/problems/") ? ctx.baseUrl + type : type,
    title,
    status: response.status,
    detail,
    instance: `urn:uuid:${ctx.requestId}`,
    code,
    resolution,
    ...extensions
  }
  const done = responseOf(JSON.stringify(finished), response.status, challengeFor(code, extensions.retryAfter, extensions.scope))
  return HttpServerResponse.setHeaders(done, { ...response.headers, ...done.headers })
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

/** An answer of the token endpoint, in its OAuth form (src/api/tokenResponse.ts), as a response: the handler's and the edge's. */
export const asHttpResponse = (answer: TokenEndpointResponse): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(answer.body, { status: answer.status, headers: answer.headers, contentType: "application/json" })
