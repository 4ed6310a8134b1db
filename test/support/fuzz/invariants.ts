/**
 * The invariants every answer of the service must satisfy, whatever was sent (CONTRACT C3, C6, C7,
 * C8; RFC 9457, RFC 9110). `violationsOf` returns what is wrong with one exchange as sentences, so a
 * property can report all of them at once and the meta-test (invariants.test.ts) can show that each
 * check trips on a deliberately broken answer.
 */
import { OAuthErrorCode } from "../../../src/api/schemas.ts"
import type { RawResponse } from "./http.ts"
import type { OpenApiModel, OperationModel } from "./openapi.ts"

/** Statuses any request may meet whatever the operation declares (C7 table, Node's 431). */
const CROSS_CUTTING_STATUSES: ReadonlySet<number> = new Set([400, 401, 403, 404, 405, 413, 415, 429, 431])

/**
 * Pages served beside the API (not operations of the document, src/http/documentRoutes.ts), with their
 * methods and the status of a successful GET: documents 200, the favicon 204, the redirects to /docs.
 */
const EXTRA_ROUTES: ReadonlyArray<readonly [RegExp, ReadonlyArray<string>, number]> = [
  [/^\/openapi\.json$/, ["GET", "HEAD"], 200],
  [/^\/docs$/, ["GET", "HEAD"], 200],
  [/^\/docs\/(scalar|start)\.js$/, ["GET", "HEAD"], 200],
  [/^\/problems(\/[^/]+)?$/, ["GET", "HEAD"], 200],
  [/^\/(livez|readyz)$/, ["GET", "HEAD"], 200],
  [/^\/favicon\.ico$/, ["GET", "HEAD"], 204],
  [/^\/$/, ["GET", "HEAD"], 302],
  [/^\/docs\/$/, ["GET", "HEAD"], 308]
]

/** Problem codes of the token endpoint's refusals that RFC 6749 has no `error` for (`invalid_request`). */
const OAUTH_REFUSAL_CODES: ReadonlySet<unknown> = new Set(["rate_limited", "method_not_allowed", "payload_too_large", "unsupported_media_type"])
const OAUTH_ERROR_CODES: ReadonlySet<string> = new Set(OAuthErrorCode.literals)

/** What would betray internals on the wire (RFC 9457 §5). */
const INTERNALS_MARKERS: ReadonlyArray<readonly [string, RegExp]> = [
  ["node_modules path", /node_modules/],
  ["TypeScript source location", /\.ts:\d+/],
  ["stack frame", /\bat [\w$.<>[\]]+ \(|\n\s+at /],
  ["error class prefix", /\b\w*Error: /],
  ["file URL", /file:\/\//]
]

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

export interface Exchange {
  readonly method: string
  /** The request target as sent (path and query, possibly odd). */
  readonly target: string
  /** Everything the client sent, as text: markers echoed from it are not internals. */
  readonly sent: string
  readonly response: RawResponse
  /**
   * Node's HTTP parser may refuse the request before the application sees it (invalid method token,
   * malformed header or Content-Length): a bare 400 without a body is then acceptable.
   */
  readonly parserMayRefuse?: boolean
}

export interface Target {
  /** The operation of the document, when the method and path name one. */
  readonly operation: OperationModel | undefined
  /** Methods the path accepts (from the document or the extra pages); undefined for an unknown path. */
  readonly allowed: ReadonlyArray<string> | undefined
  readonly template: string | undefined
  /** The status of a successful request to a page beside the API (EXTRA_ROUTES). */
  readonly pageStatus?: number
}

const safeDecode = (path: string) => {
  try {
    return decodeURIComponent(path)
  } catch {
    return undefined
  }
}

/**
 * What the router will take the target for. Paths are matched exactly (no case or slash folding,
 * routeTable.ts), after percent-decoding as the router does.
 */
export const resolveTarget = (model: OpenApiModel, method: string, target: string): Target => {
  // An absolute-form target (RFC 9112 §3.2.2) names the same path; the router (effect/http
  // FindMyWay) cuts the path at '?', '#' and ';' alike.
  const rawPath = target.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, "").split(/[?#;]/)[0]!
  // ... and percent-decodes it, except an encoded slash (which stays part of one segment).
  const path = safeDecode(rawPath.replace(/%2F/gi, "%252F"))
  if (path === undefined) return { operation: undefined, allowed: undefined, template: undefined }
  const declared = model.methodsOf(path)
  if (declared.length > 0) {
    const allowed = declared.includes("GET") ? [...declared, "HEAD"] : [...declared]
    const effective = method.toUpperCase() === "HEAD" ? "GET" : method
    return { operation: model.find(effective, path), allowed, template: path }
  }
  for (const [pattern, methods, pageStatus] of EXTRA_ROUTES) {
    if (pattern.test(path)) return { operation: undefined, allowed: methods, template: path, pageStatus }
  }
  return { operation: undefined, allowed: undefined, template: undefined }
}

const sortMethods = (methods: ReadonlyArray<string>) => {
  const order = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
  return [...methods].sort((a, b) => order.indexOf(a) - order.indexOf(b)).join(", ")
}

const parseJson = (text: string): { ok: true; value: unknown } | { ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/** Every violated invariant of one exchange, as readable sentences; empty when all hold. */
export const violationsOf = (model: OpenApiModel, publicBaseUrl: string, exchange: Exchange): Array<string> => {
  const v: Array<string> = []
  const { response: res, method } = exchange
  const status = res.status
  const target = resolveTarget(model, method, exchange.target)
  const op = target.operation
  const isHead = method.toUpperCase() === "HEAD"
  const contentType = res.headers["content-type"] ?? ""

  if (status === 0) return [`no HTTP answer (connection closed) for ${method} ${exchange.target}`]
  // 500 is never an answer by design (the brief: a 500 is a defect); 502/503 are, where declared.
  if (status === 500) v.push("status 500: an unexpected fault is a defect")

  const declared = op?.statuses ?? new Set<number>()
  const preflight = method.toUpperCase() === "OPTIONS" && status === 204
  const extraPageOk = op === undefined && target.allowed !== undefined && status === target.pageStatus
  if (!declared.has(status) && !CROSS_CUTTING_STATUSES.has(status) && !preflight && !extraPageOk && status !== 500) {
    v.push(`status ${status} is neither declared for ${op?.operationId ?? target.template ?? "this path"} nor cross-cutting`)
  }

  // Node's own refusals: 431 (headers over 16 KiB) and a bare 400 from its parser have no problem body.
  const nodeLevel = status === 431 || (status === 400 && res.body.length === 0 && exchange.parserMayRefuse === true)
  if (nodeLevel) return v

  const requestId = res.headers["x-request-id"] ?? ""
  if (!UUID.test(requestId)) v.push(`X-Request-Id missing or not a lower-case UUID: ${JSON.stringify(requestId)}`)
  if (res.headers["x-content-type-options"] !== "nosniff") v.push("X-Content-Type-Options: nosniff missing")
  if (isHead && res.body.length > 0) v.push(`HEAD answered with a ${res.body.length}-byte body`)

  // Error bodies are where stack traces leak (2xx pages such as /docs legitimately bundle script code).
  if (status >= 400) {
    for (const [what, marker] of INTERNALS_MARKERS) {
      if (marker.test(res.text) && !marker.test(exchange.sent)) v.push(`internals on the wire (${what}): ${res.text.slice(0, 200)}`)
    }
  }

  if (status === 405) {
    const allow = res.headers["allow"]
    if (allow === undefined) v.push("405 without Allow")
    else if (target.allowed !== undefined && allow !== sortMethods(target.allowed)) {
      v.push(`405 Allow is "${allow}", expected "${sortMethods(target.allowed)}"`)
    }
  }
  if (status === 401 && (res.headers["www-authenticate"] ?? "") === "") v.push("401 without WWW-Authenticate")
  // C2: CORS is never offered on the token endpoint, however its path is spelled.
  if (op?.operationId === "requestToken" || target.template === "/oauth/token") {
    if (res.headers["access-control-allow-origin"] !== undefined) v.push("CORS header on /oauth/token (C2 forbids it)")
  }
  if ((status === 429 || status === 503) && !/^\d+$/.test(res.headers["retry-after"] ?? "")) {
    v.push(`${status} without an integer Retry-After`)
  }

  if (status >= 400) {
    // C6: every error of the token endpoint, whatever the method, is RFC 6749 JSON; a defect's 500 is not.
    const oauthJson = (op?.operationId === "requestToken" || target.template === "/oauth/token") && status !== 500
    const expectedType = oauthJson ? /^application\/json(;|$)/ : /^application\/problem\+json(;|$)/
    if (!expectedType.test(contentType)) {
      v.push(`error ${status} has Content-Type "${contentType}", expected ${oauthJson ? "application/json" : "application/problem+json"}`)
    }
    if (isHead) return v
    const parsed = parseJson(res.text)
    if (!parsed.ok || typeof parsed.value !== "object" || parsed.value === null || Array.isArray(parsed.value)) {
      v.push(`error ${status} body is not a JSON object: ${res.text.slice(0, 120)}`)
      return v
    }
    const body = parsed.value as Record<string, unknown>
    for (const member of ["type", "title", "detail", "code", "resolution"]) {
      if (typeof body[member] !== "string") v.push(`problem member ${member} missing or not a string`)
    }
    if (body.status !== status) v.push(`problem status ${JSON.stringify(body.status)} differs from HTTP ${status}`)
    if (typeof body.code === "string") {
      if (!/^[a-z0-9_]+$/.test(body.code)) v.push(`problem code ${body.code} does not match ^[a-z0-9_]+$`)
      if (body.type !== `${publicBaseUrl}/problems/${body.code}`) v.push(`problem type ${String(body.type)} is not ${publicBaseUrl}/problems/${body.code}`)
    }
    if (body.instance !== `urn:uuid:${requestId}`) v.push(`problem instance ${String(body.instance)} is not urn:uuid:<X-Request-Id>`)
    if (oauthJson) {
      if (typeof body.error !== "string" || !OAUTH_ERROR_CODES.has(body.error)) v.push(`OAuth error member missing or unknown: ${String(body.error)}`)
      if (typeof body.error_description !== "string") v.push("OAuth error_description missing")
      if (body.code !== body.error && !(body.error === "invalid_request" && OAUTH_REFUSAL_CODES.has(body.code))) {
        v.push(`code ${String(body.code)} differs from error ${String(body.error)}`)
      }
    }
    if (op !== undefined && declared.has(status)) {
      const problems = op.validateResponse(status, body)
      if (problems !== undefined && problems.length > 0) v.push(`${status} body does not match the document: ${problems.join("; ")}`)
    }
    return v
  }

  if (status >= 200 && status < 300 && op !== undefined) {
    if (op.operationId === "requestToken" && status === 200) {
      if (res.headers["cache-control"] !== "no-store") v.push("token response without Cache-Control: no-store")
      if (res.headers["pragma"] !== "no-cache") v.push("token response without Pragma: no-cache")
    }
    const declaredType = op.mediaType(status)
    if (declaredType !== undefined && !contentType.startsWith(declaredType)) {
      v.push(`${status} has Content-Type "${contentType}", the document declares ${declaredType}`)
    }
    // A JSON body is checked against its schema; a text one (the widget's script) is text by definition, and an
    // event stream's body is not read (support/fuzz/http.ts: it never ends); its head is checked above.
    if (!isHead && declaredType !== undefined && /[/+]json$/.test(declaredType)) {
      const parsed = parseJson(res.text)
      if (!parsed.ok) v.push(`${status} body is not JSON: ${res.text.slice(0, 120)}`)
      else {
        const problems = op.validateResponse(status, parsed.value)
        if (problems !== undefined && problems.length > 0) v.push(`${status} body does not match the document: ${problems.join("; ")}`)
      }
    }
  }
  return v
}

/** The body of a JSON answer, or undefined. */
export const jsonOf = (res: RawResponse): any => {
  const parsed = parseJson(res.text)
  return parsed.ok ? parsed.value : undefined
}
