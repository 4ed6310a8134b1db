/**
 * The HTTP edge: one global middleware that every request crosses (CONTRACT C3, C7, C8, C9).
 * Request ids, body limits, CORS, 404/405, conversion of every error into a problem, defects
 * logged and answered 500 without internals, security headers, the access log.
 */
import { ByteSize, Context, Effect, type Types } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { AppConfig } from "../config.ts"
import { AccessLog } from "../observability/AccessLog.ts"
import { clientIp } from "./clientIp.ts"
import { recordRequest } from "../observability/metrics.ts"
import { completeProblem, isJsonResponse, isProblemResponse, problemResponse, type ProblemContext } from "./problemResponse.ts"
import { CurrentRequestId, requestIdOf } from "./requestId.ts"
import { makeRouteTable, type RouteTable } from "./routeTable.ts"

/** Browser callers may use these paths; /oauth/token is deliberately absent (C2: never CORS). */
const publicOperationPaths = new Set(["/api/health", "/api/v1/exchange-rates", "/api/subscribe"])
const noCorsPaths = new Set(["/oauth/token"])
const exposedHeaders = "X-Request-Id, RateLimit, RateLimit-Policy, Retry-After, WWW-Authenticate"
const allowedRequestHeaders = "Content-Type, Authorization, X-Request-Id"

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

/** A body in a content coding the service cannot undo (it reads bodies as sent): anything but `identity`. */
const isEncodedBody = (request: HttpServerRequest.HttpServerRequest) => {
  const coding = request.headers["content-encoding"]
  const hasBody = Number(request.headers["content-length"] ?? 0) > 0 || request.headers["transfer-encoding"] !== undefined
  return hasBody && coding !== undefined && !/^\s*(identity\s*)?$/i.test(coding)
}

type Handled = Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled, HttpServerRequest.HttpServerRequest>

export const makeEdge = (routes: RouteTable = makeRouteTable()) =>
  HttpRouter.middleware(
    Effect.gen(function*() {
      const config = yield* AppConfig
      const accessLog = yield* AccessLog
      const maxBody = ByteSize.bytes(config.maxBodyBytes)
      const corsAll = config.corsOrigins === "*"
      const corsSet = new Set(corsAll ? [] : config.corsOrigins)

      const corsOrigin = (origin: string | undefined): string | undefined =>
        origin === undefined ? undefined : corsAll ? "*" : corsSet.has(origin) ? origin : undefined

      return (httpEffect): Handled =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const started = performance.now()
          const requestId = requestIdOf(request.headers["x-request-id"])
          const ctx: ProblemContext = { baseUrl: config.publicBaseUrl, requestId }
          const path = pathOf(request.url)
          const route = routes.match(path)
          const allowed = route?.methods
          // The router percent-decodes and cuts at ';': decide CORS on the route it matched, not the spelling.
          const routePath = route?.pattern ?? path
          const origin = request.headers["origin"]

          let response: HttpServerResponse.HttpServerResponse
          if (request.method === "OPTIONS") {
            response = preflight(request, routePath, allowed, corsOrigin(origin), ctx)
          } else if (allowed !== undefined && !allowed.includes(request.method)) {
            // Answered before the body is read: the method decides, whatever was sent.
            response = methodNotAllowed(request.method, allowed, ctx)
          } else if (Number(request.headers["content-length"] ?? 0) > config.maxBodyBytes) {
            response = problemResponse("payload_too_large", ctx)
          } else if (isEncodedBody(request) && allowed !== undefined && !noCorsPaths.has(routePath)) {
            // RFC 9110 §15.5.16: a coding we cannot decode is 415 with Accept-Encoding. The token
            // endpoint keeps its RFC 6749 answers (the form will not parse: 400 invalid_request).
            response = HttpServerResponse.setHeader(
              problemResponse("unsupported_media_type", ctx, {
                detail: "Content-Encoding is not supported; send the body uncompressed."
              }),
              "accept-encoding",
              "identity"
            )
          } else {
            response = yield* httpEffect.pipe(
              // One context update for both: this runs on every request.
              Effect.updateContext((context: Context.Context<never>) =>
                Context.add(Context.add(context, HttpServerRequest.MaxBodySize, maxBody), CurrentRequestId, requestId)
              ),
              Effect.catchCause((cause) =>
                Effect.flatMap(HttpServerError.causeResponse(cause), ([res]) =>
                  // Defects never reach the wire; the log keeps them, tagged with the request id.
                  res.status >= 500 && res.status !== 503
                    ? Effect.as(Effect.logError("unhandled error", cause).pipe(Effect.annotateLogs({ requestId })), res)
                    : Effect.succeed(res)
                )
              )
            )
            response = toProblem(response, request, allowed, ctx)
          }

          const headers: Record<string, string> = {
            "x-request-id": requestId,
            "x-content-type-options": "nosniff"
          }
          if (response.headers["cache-control"] === undefined) headers["cache-control"] = "no-store"
          const allowOrigin = noCorsPaths.has(routePath) ? undefined : corsOrigin(origin)
          if (allowOrigin !== undefined) {
            headers["access-control-allow-origin"] = allowOrigin
            headers["access-control-expose-headers"] = exposedHeaders
            if (!corsAll) headers["vary"] = "Origin"
          }
          response = HttpServerResponse.setHeaders(response, headers)
          const elapsedMs = performance.now() - started
          recordRequest(route?.pattern ?? "unmatched", request.method, response.status, elapsedMs / 1000)
          accessLog.write({
            method: request.method,
            path,
            status: response.status,
            durationMs: Math.round(elapsedMs * 1000) / 1000,
            requestId,
            clientIp: clientIp(request, config.trustProxy)
          })
          return response
        })
    }),
    { global: true }
  )

const methodNotAllowed = (method: string, allowed: ReadonlyArray<string>, ctx: ProblemContext) =>
  HttpServerResponse.setHeader(
    problemResponse("method_not_allowed", ctx, { detail: `${method} is not supported on this path.` }),
    "allow",
    allowed.join(", ")
  )

/** CORS preflight (Fetch standard): 204 for an allowed origin on a public operation, else 405/404. */
const preflight = (
  request: HttpServerRequest.HttpServerRequest,
  path: string,
  allowed: ReadonlyArray<string> | undefined,
  allowOrigin: string | undefined,
  ctx: ProblemContext
) => {
  if (allowed === undefined) return problemResponse("not_found", ctx)
  const requestedMethod = request.headers["access-control-request-method"]
  if (
    publicOperationPaths.has(path) && allowOrigin !== undefined && requestedMethod !== undefined &&
    allowed.includes(requestedMethod)
  ) {
    return HttpServerResponse.empty({
      status: 204,
      headers: {
        "access-control-allow-methods": allowed.join(", "),
        "access-control-allow-headers": allowedRequestHeaders,
        "access-control-max-age": "600",
        "vary": "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
      }
    })
  }
  return methodNotAllowed("OPTIONS", allowed, ctx)
}

/** Whatever produced an error response, the client sees a finished problem (JSON OAuth bodies excepted). */
const toProblem = (
  response: HttpServerResponse.HttpServerResponse,
  request: HttpServerRequest.HttpServerRequest,
  allowed: ReadonlyArray<string> | undefined,
  ctx: ProblemContext
): HttpServerResponse.HttpServerResponse => {
  if (response.status < 400) return response
  if (isProblemResponse(response)) return completeProblem(response, ctx)
  if (isJsonResponse(response)) return response // RFC 6749 token errors are application/json by design
  switch (response.status) {
    case 404:
      return allowed === undefined
        ? problemResponse("not_found", ctx, { detail: `No resource exists at ${pathOf(request.url)}.` })
        : methodNotAllowed(request.method, allowed, ctx)
    case 405:
      return methodNotAllowed(request.method, allowed ?? [], ctx)
    case 413:
      return problemResponse("payload_too_large", ctx)
    case 415: {
      const type = request.headers["content-type"]
      return HttpServerResponse.setHeader(
        problemResponse("unsupported_media_type", ctx, {
          detail: type === undefined
            ? "The request body must be application/json."
            : `Content-Type ${type.slice(0, 100)} is not supported; send application/json.`
        }),
        "accept",
        "application/json"
      )
    }
    case 499:
      return response // the client went away; nobody reads this
    default:
      return response.status >= 500
        ? problemResponse("internal_error", ctx)
        : problemResponse("validation_failed", ctx, { detail: "The request could not be read." })
  }
}
