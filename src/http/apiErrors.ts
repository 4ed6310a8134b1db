/**
 * The HttpApi side of the edge: what only the Effect app can do. It gives handlers the request id,
 * body limit and the request's span as their parent, and turns whatever the app answered with (typed errors, router 404s, defects) into
 * a complete problem (C7), and a cacheable 200 whose ETag the request names into a 304. Headers, limits, logs,
 * metrics and the request's span are the edge's (edge.ts).
 */
import { ByteSize, Context, Effect, Tracer, type Types } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { AppConfig } from "../config/AppConfig.ts"
import { ifNoneMatchMatches } from "./conditional.ts"
import { exchangeOf } from "./exchange.ts"
import { completeProblem, isJsonResponse, isProblemResponse, problemResponse, type ProblemContext } from "./problemResponse.ts"
import { CurrentRequestId } from "./requestId.ts"

type Handled = Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled, HttpServerRequest.HttpServerRequest>

export const ApiErrors = HttpRouter.middleware(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const maxBody = ByteSize.bytes(config.maxBodyBytes)
    return (httpEffect): Handled =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const exchange = exchangeOf(request)
        const requestId = exchange?.requestId ?? crypto.randomUUID()
        const span = exchange?.span
        const ctx: ProblemContext = { baseUrl: config.publicBaseUrl, requestId }
        const response = yield* httpEffect.pipe(
          // One context update for all: this runs on every request the HttpApi serves.
          Effect.updateContext((context: Context.Context<never>) => {
            const served = Context.add(Context.add(context, HttpServerRequest.MaxBodySize, maxBody), CurrentRequestId, requestId)
            // The handlers' spans are children of the request's, which the edge made and ends.
            return span === undefined ? served : Context.add(served, Tracer.ParentSpan, span)
          }),
          Effect.catchCause((cause) =>
            Effect.flatMap(HttpServerError.causeResponse(cause), ([res]) =>
              // Defects never reach the wire; the log keeps them, tagged with the request id.
              res.status >= 500 && res.status !== 503
                ? Effect.as(Effect.logError("unhandled error", cause).pipe(Effect.annotateLogs({ requestId })), res)
                : Effect.succeed(res)
            )
          )
        )
        return toProblem(response, request, ctx)
      })
  }),
  { global: true }
)

/**
 * A cacheable 200 of a GET or HEAD whose ETag the request's If-None-Match names: 304 with the same
 * validator and Cache-Control, no body (as the edge answers its ready answers, edgeResponses.ts).
 */
const notModified = (response: HttpServerResponse.HttpServerResponse, request: HttpServerRequest.HttpServerRequest) => {
  const etag = response.headers.etag
  if (response.status !== 200 || etag === undefined || (request.method !== "GET" && request.method !== "HEAD")) return response
  if (!ifNoneMatchMatches(request.headers["if-none-match"], etag)) return response
  const headers: Record<string, string> = { etag }
  const cacheControl = response.headers["cache-control"]
  if (cacheControl !== undefined) headers["cache-control"] = cacheControl
  return HttpServerResponse.empty({ status: 304, headers })
}

/** Whatever produced an error response, the client sees a finished problem (JSON OAuth bodies excepted). */
const toProblem = (
  response: HttpServerResponse.HttpServerResponse,
  request: HttpServerRequest.HttpServerRequest,
  ctx: ProblemContext
): HttpServerResponse.HttpServerResponse => {
  if (response.status < 400) return notModified(response, request)
  if (isProblemResponse(response)) return completeProblem(response, ctx)
  if (isJsonResponse(response)) return response // RFC 6749 token errors are application/json by design
  switch (response.status) {
    case 404:
      return problemResponse("not_found", ctx, { detail: `No resource exists at ${request.url.split("?")[0]}.` })
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
