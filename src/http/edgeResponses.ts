/**
 * How the edge (edge.ts) answers: a response it makes gets the edge's headers (C7, C9) in its one
 * `writeHead`, a request it hands on gets them set before the HttpApi writes; either way the response
 * is observed once (access-log line and metrics, observability/), and a defect becomes a 500.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import type { HttpServerResponse } from "effect/http"
import type { ProblemCode } from "../api/problems.ts"
import { refusalResponse } from "../api/tokenResponse.ts"
import type { AccessLog } from "../observability/AccessLog.ts"
import { unmatchedMetrics } from "../observability/metrics.ts"
import type { RequestSpans } from "../observability/requestSpan.ts"
import { ifNoneMatchMatches } from "./conditional.ts"
import type { Exchange } from "./exchange.ts"
import type { CacheableBody } from "./ReadyAnswers.ts"
import { asHttpResponse, problemContentType, type ProblemContext, problemWire } from "./problemResponse.ts"

/** Node's handler for the HttpApi app (NodeHttpServer.makeHandler): what the edge hands a request on to. */
export type AppHandler = (req: IncomingMessage, res: ServerResponse) => void

const exposedHeaders = "X-Request-Id, RateLimit, RateLimit-Policy, Retry-After, WWW-Authenticate"

export const makeEdgeResponses = (options: {
  readonly publicBaseUrl: string
  /** The allowed origin to echo for this request's Origin, if any (CORS_ORIGINS). */
  readonly corsOrigin: (origin: string | undefined) => string | undefined
  readonly corsAll: boolean
  readonly accessLog: AccessLog["Service"]
  /** The requests' spans when traces are exported (each exchange's `span`), else undefined. */
  readonly spans: RequestSpans | undefined
  /** Logs a defect with the request id (the edge's Effect runtime). */
  readonly logDefect: (exchange: Exchange, cause: unknown) => void
}) => {
  const { accessLog, corsAll, corsOrigin, publicBaseUrl, spans } = options

  /** Defects never reach the wire (C7): logged with the request id, answered 500. */
  const defect = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, cause: unknown) => {
    options.logDefect(exchange, cause)
    if (!res.headersSent) writeProblem(req, res, exchange, "internal_error")
    else res.destroy()
  }
  const problemContext = (exchange: Exchange): ProblemContext => ({ baseUrl: publicBaseUrl, requestId: exchange.requestId })
  /** A refusal made here, in the route's error form (C6: the token endpoint's are OAuth JSON). */
  const refuse = (
    req: IncomingMessage,
    res: ServerResponse,
    exchange: Exchange,
    code: "method_not_allowed" | "payload_too_large",
    extra?: { readonly detail: string }
  ) =>
    exchange.route?.errorForm === "oauth"
      ? send(req, res, exchange, asHttpResponse(refusalResponse({ publicBaseUrl, requestId: exchange.requestId }, code, extra?.detail)))
      : writeProblem(req, res, exchange, code, extra)

  /**
   * Headers every response carries (C7, C9), as a flat list: written in the one `writeHead` of a
   * response made here, or set on the response before the HttpApi writes its own (which may override
   * `cache-control`, as the documents do). Later steps add theirs (RateLimit fields, Allow).
   */
  const edgeHeaders = (req: IncomingMessage, exchange: Exchange): Array<string> => {
    const headers = ["x-request-id", exchange.requestId, "x-content-type-options", "nosniff", "cache-control", "no-store"]
    const allowOrigin = exchange.route?.public === true ? corsOrigin(req.headers.origin) : undefined
    if (allowOrigin !== undefined) {
      headers.push("access-control-allow-origin", allowOrigin, "access-control-expose-headers", exposedHeaders)
      if (!corsAll) headers.push("vary", "Origin")
    }
    return headers
  }

  /** The access-log line, metrics and span of every response (499: the client left before it was sent). */
  const observe = (req: IncomingMessage, exchange: Exchange, status: number) => {
    if (exchange.span !== undefined) spans!.end(exchange.span, req, exchange, status)
    const elapsedMs = performance.now() - exchange.started
    const metrics = exchange.route?.metrics ?? unmatchedMetrics
    metrics.record(req.method!, status, elapsedMs / 1000)
    accessLog.write({
      method: req.method!,
      path: exchange.path,
      status,
      durationMs: Math.round(elapsedMs * 1000) / 1000,
      requestId: exchange.requestId,
      clientIp: exchange.clientIp
    })
  }

  /** The edge's headers and a response's own, whose value of a header wins (as writeHead over setHeader would). */
  const headersWith = (exchange: Exchange, own: Array<string | number>) => {
    const edge = exchange.headers
    let headers: Array<string | number> = edge
    for (let i = 0; i < own.length; i += 2) {
      if (edge.indexOf(own[i] as string) % 2 === 0) {
        const names = new Set<string | number>(own.filter((_, j) => j % 2 === 0))
        headers = edge.filter((_, j) => !names.has(edge[j - (j % 2)]!))
        break
      }
    }
    return headers.concat(own) as Array<string>
  }

  /** Writes a response made here, with the edge's headers in the same `writeHead`, and observes it. */
  const write = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, status: number, own: Array<string | number>, body?: string | Uint8Array) => {
    res.writeHead(status, headersWith(exchange, own))
    res.end(body)
    observe(req, exchange, status)
  }

  /**
   * The 200 head of an event stream (C10), never compressed nor buffered by a proxy; HEAD ends here. The stream is
   * observed when it ends (499: the client left before its head was written). Undefined: nothing to stream.
   */
  const startStream = (req: IncomingMessage, res: ServerResponse, exchange: Exchange): ServerResponse | undefined => {
    if (res.destroyed || res.writableEnded) {
      observe(req, exchange, 499)
      return undefined
    }
    const own = ["content-type", "text/event-stream; charset=utf-8", "cache-control", "no-cache, no-transform", "x-accel-buffering", "no"]
    if (req.method === "HEAD") return void write(req, res, exchange, 200, own)
    res.writeHead(200, headersWith(exchange, own))
    res.once("close", () => observe(req, exchange, 200))
    return res
  }

  /** A problem (or any Effect response with a byte body) made here. */
  const send = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, response: HttpServerResponse.HttpServerResponse) => {
    const own: Array<string | number> = []
    // Length and type come from the body below.
    for (const name in response.headers) {
      if (name !== "content-length" && name !== "content-type") own.push(name, response.headers[name]!)
    }
    if (response.body._tag !== "Uint8Array") return write(req, res, exchange, response.status, own)
    own.push("content-type", response.body.contentType, "content-length", response.body.body.byteLength)
    write(req, res, exchange, response.status, own, response.body.body)
  }

  /** A problem of the catalogue, written as one string (the edge's headers carry its `cache-control`). */
  const writeProblem = (
    req: IncomingMessage,
    res: ServerResponse,
    exchange: Exchange,
    code: ProblemCode,
    extra?: { readonly detail?: string; readonly [member: string]: unknown }
  ) => {
    const wire = problemWire(code, problemContext(exchange), extra)
    const own: Array<string | number> = ["content-type", problemContentType, "content-length", Buffer.byteLength(wire.text)]
    write(req, res, exchange, wire.status, wire.challenge.length === 0 ? own : [...wire.challenge, ...own], wire.text)
  }

  /**
   * A ready answer's 200. A cacheable one carries its ETag and Cache-Control (over the edge's
   * `no-store`), and is a 304 without a body when If-None-Match names its ETag (RFC 9110 §15.4.5: the
   * same validator, Cache-Control and Vary as the 200).
   */
  const sendJson = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, answer: string | Uint8Array | CacheableBody) => {
    if (typeof answer === "string" || answer instanceof Uint8Array) {
      const bytes = typeof answer === "string" ? Buffer.from(answer) : answer
      return write(req, res, exchange, 200, ["content-type", "application/json", "content-length", bytes.byteLength], bytes)
    }
    const validators = ["etag", answer.etag, "cache-control", answer.cacheControl]
    if (ifNoneMatchMatches(req.headers["if-none-match"], answer.etag)) return write(req, res, exchange, 304, validators)
    write(req, res, exchange, 200, ["content-type", "application/json", "content-length", answer.body.byteLength, ...validators], answer.body)
  }

  /** Hands the request to the HttpApi with the edge's headers set on the response; observed when Node is done. */
  const toApp = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, app: AppHandler) => {
    const headers = exchange.headers
    for (let i = 0; i < headers.length; i += 2) res.setHeader(headers[i]!, headers[i + 1]!)
    res.once("close", () => observe(req, exchange, res.writableFinished ? res.statusCode : 499))
    app(req, res)
  }

  return { defect, refuse, edgeHeaders, write, send, writeProblem, sendJson, toApp, problemContext, startStream }
}
