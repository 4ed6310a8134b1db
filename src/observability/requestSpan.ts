/**
 * The server span of a request when traces are exported: one per request, made by the edge
 * (src/http/edge.ts) when the request arrives and ended with its access-log line, whoever answered it
 * (a refusal, a ready answer, the HttpApi). Named and annotated as Effect's HttpMiddleware.tracer does
 * its own (OpenTelemetry's HTTP conventions: the method as name, `http.*`, `url.*`, `client.address`),
 * plus the request id; the HttpApi makes none (EdgeServer.ts), and its handlers' spans are children of
 * this one (apiErrors.ts). With tracing off no span is made and nothing here runs.
 */
import type { IncomingMessage } from "node:http"
import { Cause, Clock, Context, Exit, LogLevel, Option, References, Tracer } from "effect"
import { type Headers, HttpTraceContext } from "effect/http"

/** What the edge knows of a request when it is answered (its Exchange, src/http/exchange.ts). */
interface RequestFacts {
  readonly requestId: string
  /** The caller's address per TRUST_PROXY (C2). */
  readonly clientIp: string
  /** The matched route, if any. */
  readonly route: { readonly pattern: string } | undefined
}

export interface RequestSpans {
  /** The request's span, started now; its parent is the caller's W3C or B3 trace context, if any. */
  readonly start: (req: IncomingMessage) => Tracer.Span
  /** Ends the span with the response's status (5xx: an error; 499, the client left: interrupted). */
  readonly end: (span: Tracer.Span, req: IncomingMessage, facts: RequestFacts, status: number) => void
}

/** A 5xx, as Effect's tracer reports one: an error named after the response. */
class ResponseError extends Error {
  override readonly name = "ResponseError"
}

const urlOf = (req: IncomingMessage): URL | undefined => {
  const url = req.url ?? "/"
  const scheme = /^https:/i.test(url) ? "https" : "http"
  try {
    // `.` first: a path starting with `//` cannot replace the host.
    return new URL(url.startsWith("/") ? `.${url}` : url, `${scheme}://${req.headers.host ?? "localhost"}`)
  } catch {
    return undefined
  }
}

const defaultPorts: Record<string, number> = { "http:": 80, "https:": 443 }

const annotate = (span: Tracer.Span, req: IncomingMessage, facts: RequestFacts, status: number) => {
  span.attribute("http.request.method", req.method)
  const url = urlOf(req)
  if (url !== undefined) {
    span.attribute("url.full", url.href)
    span.attribute("url.path", url.pathname)
    if (url.search.length > 1) span.attribute("url.query", url.search.slice(1))
    span.attribute("url.scheme", url.protocol.slice(0, -1))
    if (url.hostname !== "") {
      span.attribute("server.address", url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname)
      const port = url.port === "" ? defaultPorts[url.protocol] : Number(url.port)
      if (port !== undefined) span.attribute("server.port", port)
    }
  }
  if (facts.route !== undefined) span.attribute("http.route", facts.route.pattern)
  if (req.headers["user-agent"] !== undefined) span.attribute("user_agent.original", req.headers["user-agent"])
  span.attribute("client.address", facts.clientIp)
  span.attribute("http.response.status_code", status)
  // The id every response and log line of the request carries (edge.ts), to go from a trace to the logs.
  span.attribute("http.response.header.x-request-id", facts.requestId)
}

/**
 * The spans of the tracer in `context`, or undefined when tracing is off (References.TracerEnabled
 * false, as server.ts sets it without an OTLP endpoint, or no tracer but Effect's native one).
 */
export const makeRequestSpans = (context: Context.Context<never>): RequestSpans | undefined => {
  const tracer = Context.get(context, Tracer.Tracer)
  if (!Context.get(context, References.TracerEnabled) || tracer === Tracer.nativeTracer) return undefined
  const clock = Context.get(context, Clock.Clock)
  // As Effect samples a span: unless its parent was not sampled, by its level against the minimum.
  const sampledByLevel = !LogLevel.isGreaterThan(Context.get(context, Tracer.MinimumTraceLevel), Context.get(context, Tracer.CurrentTraceLevel))
  return {
    start: (req) => {
      // It reads header values by name, and Node's parser gives them lower-cased: its own Headers without a copy.
      const parent = HttpTraceContext.fromHeaders(req.headers as unknown as Headers.Headers)
      return tracer.span({
        name: req.method ?? "GET",
        parent,
        annotations: Context.empty(),
        links: [],
        startTime: clock.currentTimeNanosUnsafe(),
        kind: "server",
        root: Option.isNone(parent),
        sampled: Option.isSome(parent) && !parent.value.sampled ? false : sampledByLevel
      })
    },
    end: (span, req, facts, status) => {
      if (span.sampled) annotate(span, req, facts, status)
      const exit = status === 499
        ? Exit.failCause(Cause.interrupt())
        : status >= 500
        ? Exit.fail(new ResponseError(`ResponseError (${status} ${req.method} ${(req.url ?? "/").split("?")[0]})`))
        : Exit.void
      span.end(clock.currentTimeNanosUnsafe(), exit)
    }
  }
}
