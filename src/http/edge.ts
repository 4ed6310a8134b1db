/**
 * The edge: the one request pipeline (CONTRACT C3, C7, C8, C9). Every request the server receives
 * crosses `Edge.handle`, which gives every response, whoever produces it, its request id, security
 * and CORS headers, its rate-limit count and fields, its access-log line and metrics, and its span when
 * traces are exported (the same answers either way):
 *
 *   1. refusals that need no operation: 404 (no route), CORS preflight, 405 + Allow, 413, 415 (a
 *      content coding);
 *   2. the rate limit of the operation (per IP, or per client with a valid Bearer token);
 *   3. for an anonymous small JSON body, its parse and decode (400 malformed_json, validation_failed),
 *      for an anonymous GET's query its decode (400 validation_failed), then a ready answer a capability holds in memory (ReadyAnswers), or else the HttpApi app.
 *
 * It runs on Node's request event, before any fiber: a request answered in steps 1-3 costs no more
 * than the work it needs, and its problem is written from parts made once (problemResponse.ts). The
 * HttpApi side (apiErrors.ts) turns typed errors and defects into problems.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { Context, Effect, Exit, Layer } from "effect"
import type { Caller, RateLimitPolicyName } from "../api/Api.ts"
import { RateLimited } from "../api/problems.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { AccessLog } from "../observability/AccessLog.ts"
import { recordRateLimited } from "../observability/metrics.ts"
import { makeRequestSpans } from "../observability/requestSpan.ts"
import { BearerCheck } from "./BearerCheck.ts"
import { unparsable } from "./bodyDecoder.ts"
import { makeClientIp } from "./clientIp.ts"
import { type Exchange, setExchange } from "./exchange.ts"
import { KnownTokens } from "./knownTokens.ts"
import { type AppHandler, makeEdgeResponses } from "./edgeResponses.ts"
import { type Decision, limitKey, rateLimitedResponse, rateLimitHeaders, RequestCounter } from "./rateLimit.ts"
import { type EventStream, EventStreams } from "./EventStreams.ts"
import { type ReadyAnswer, ReadyAnswers } from "./ReadyAnswers.ts"
import { requestIdOf } from "./requestId.ts"
import { makeRouteTable, type RouteMatch, type RouteOperation } from "./routeTable.ts"
import { readSmallBody } from "./smallBody.ts"
import { validationFailure } from "./validation.ts"

export type { AppHandler } from "./edgeResponses.ts"

const allowedRequestHeaders = "Content-Type, Authorization, X-Request-Id"
/** Bodies the edge reads are small queries; a larger one is a rarer request, left to the HttpApi. */
const maxEdgeBody = 4096
const jsonContentType = /^application\/json\s*(;\s*charset=("?)utf-8\2\s*)?$/i

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

/**
 * RFC 9112 §3.2.2 absolute-form (`GET http://host/path`): the platform routes it by its URL-normalised
 * path, which the route table may not match as written; such a request is left to the HttpApi.
 */
const isAbsoluteForm = (url: string) => url.charCodeAt(0) !== 47 /* "/" */ && /^https?:\/\//i.test(url)

const contentCodingRefused = { detail: "Content-Encoding is not supported; send the body uncompressed." }
/** Methods come from Node's parser, a closed set: one detail each, made once. */
const methodDetails = new Map<string, { readonly detail: string }>()
const methodDetail = (method: string) => {
  let detail = methodDetails.get(method)
  if (detail === undefined) methodDetails.set(method, detail = { detail: `${method} is not supported on this path.` })
  return detail
}

const hasBody = (req: IncomingMessage) =>
  Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined

/** A body in a content coding the service cannot undo (it reads bodies as sent): anything but `identity`. */
const isEncodedBody = (req: IncomingMessage) => {
  const coding = req.headers["content-encoding"]
  return coding !== undefined && hasBody(req) && !/^\s*(identity\s*)?$/i.test(coding)
}

/**
 * A chunked body the HttpApi leaves unread (a HEAD's, or one refused before or while it is read) is
 * drained only to 256 KiB by the platform (NodeHttpServer's teardownBody), which then closes the
 * connection. Announced (`Connection: close`), a keep-alive client sends its next request on a new
 * connection instead of losing it; a body read to its end takes the announcement back.
 */
const closeUnlessBodyRead = (app: AppHandler): AppHandler => (req, res) => {
  const keepAlive = res.shouldKeepAlive
  res.shouldKeepAlive = false
  req.once("end", () => {
    if (!res.headersSent) res.shouldKeepAlive = keepAlive
  })
  app(req, res)
}

export class Edge extends Context.Service<Edge, {
  /** Answers the request, or hands it to `app` with the edge's headers set and the count made. */
  readonly handle: (req: IncomingMessage, res: ServerResponse, app: AppHandler) => void
  /** Draining begins: every open event stream ends at once (C10). */
  readonly endStreams: () => void
}>()("app/Edge") {
  static readonly layer = Layer.effect(Edge, Effect.suspend(() => makeEdge))
}

const makeEdge = Effect.gen(function*() {
  const config = yield* AppConfig
  const accessLog = yield* AccessLog
  const counter = yield* RequestCounter
  const bearer = yield* BearerCheck
  const ready = new Map<string, ReadyAnswer>((yield* ReadyAnswers).map((answer) => [answer.operationId, answer]))
  const eventStreams = yield* EventStreams
  const streams = new Map<string, EventStream>(eventStreams.streams.map((stream) => [stream.operationId, stream]))
  const routes = makeRouteTable()
  const clientIpOf = makeClientIp(config.trustProxyRule)
  const knownTokens = new KnownTokens(config.tokenTtlSeconds)
  const context = yield* Effect.context<never>()
  const run = Effect.runCallbackWith(context)
  // Made for every request whoever answers it, only when traces are exported.
  const spans = makeRequestSpans(context)
  const corsAll = config.corsOrigins === "*"
  const corsSet = new Set(corsAll ? [] : config.corsOrigins)
  const corsOrigin = (origin: string | undefined): string | undefined =>
    origin === undefined ? undefined : corsAll ? "*" : corsSet.has(origin) ? origin : undefined

  const { defect, refuse, edgeHeaders, write, send, writeProblem, sendJson, toApp, problemContext, startStream } = makeEdgeResponses({
    publicBaseUrl: config.publicBaseUrl,
    corsOrigin,
    corsAll,
    accessLog,
    spans,
    logDefect: (exchange, cause) =>
      run(Effect.logError("unhandled error", cause).pipe(Effect.annotateLogs({ requestId: exchange.requestId })))
  })

  /** CORS preflight (Fetch standard): 204 for an allowed origin on a public operation, else 405. */
  const preflight = (req: IncomingMessage, res: ServerResponse, route: RouteMatch, exchange: Exchange) => {
    const requested = req.headers["access-control-request-method"]
    if (route.public && corsOrigin(req.headers.origin) !== undefined && requested !== undefined && route.methods.includes(requested)) {
      return write(req, res, exchange, 204, [
        "access-control-allow-methods", route.allow,
        "access-control-allow-headers", allowedRequestHeaders,
        "access-control-max-age", "600",
        "vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
      ])
    }
    refuseMethod(req, res, route, exchange)
  }

  const refuseMethod = (req: IncomingMessage, res: ServerResponse, route: RouteMatch, exchange: Exchange) => {
    exchange.headers.push("allow", route.allow)
    refuse(req, res, exchange, "method_not_allowed", methodDetail(req.method!))
  }

  /**
   * Step 3. An anonymous small JSON body is read, parsed and decoded here, as the HttpApi would, and
   * so is an anonymous GET's or HEAD's query where the operation declares one: a body or query that
   * does not parse or decode is answered at once; a decoded one goes to the ready answer, if any, else
   * (a body back on the stream) to the HttpApi. A token's request keeps the HttpApi's order (401/403
   * before 400); larger and chunked bodies are the HttpApi's.
   */
  const answer = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, operation: RouteOperation, app: AppHandler) => {
    const stream = streams.get(operation.operationId)
    if (stream !== undefined) return openStream(req, res, exchange, operation, stream, app)
    const readyAnswer = exchange.bearer === undefined ? ready.get(operation.operationId) : undefined
    const decode = req.headers.authorization === undefined ? operation.decodeBody : undefined
    if (req.method !== "POST") {
      const decodeQuery = operation.decodeQuery
      // A query left undecoded here (a token's request) leaves the request to the HttpApi, as a body does.
      if (decodeQuery !== undefined && req.headers.authorization !== undefined) return toApp(req, res, exchange, app)
      let query: unknown
      try {
        if (decodeQuery !== undefined) {
          const decoded = decodeQuery(req.url!)
          if (Exit.isFailure(decoded)) {
            const issue = Exit.findErrorOption(decoded)
            // Not a schema issue (a defect): the HttpApi decides.
            if (issue._tag === "None") return toApp(req, res, exchange, app)
            return writeProblem(req, res, exchange, "validation_failed", validationFailure(issue.value))
          }
          query = decoded.value
        }
        if (readyAnswer !== undefined && !hasBody(req)) {
          const found = readyAnswer.answer(query, exchange.clientIp)
          if (found !== undefined) return sendJson(req, res, exchange, found)
        }
      } catch (error) {
        return defect(req, res, exchange, error)
      }
      return toApp(req, res, exchange, app)
    }
    if (decode === undefined) return toApp(req, res, exchange, app)
    const length = Number(req.headers["content-length"])
    if (!(Number.isInteger(length) && length > 0 && length <= maxEdgeBody) || req.headers["transfer-encoding"] !== undefined) {
      return toApp(req, res, exchange, app)
    }
    if (!jsonContentType.test(req.headers["content-type"] ?? "")) return toApp(req, res, exchange, app)
    const take = (body: Uint8Array) => {
      try {
        const payload = decode(body)
        if (payload === unparsable) {
          writeProblem(req, res, exchange, "malformed_json")
          return true
        }
        if (Exit.isSuccess(payload)) {
          const found = readyAnswer?.answer(payload.value, exchange.clientIp)
          if (found === undefined) return false
          sendJson(req, res, exchange, found)
          return true
        }
        const issue = Exit.findErrorOption(payload)
        // Not a schema issue (a defect): the HttpApi decides.
        if (issue._tag === "None") return false
        writeProblem(req, res, exchange, "validation_failed", validationFailure(issue.value))
      } catch (error) {
        defect(req, res, exchange, error)
      }
      return true
    }
    // Put back when the edge does not answer: the HttpApi reads the body as if nobody had.
    readSmallBody(req, length, take, () => toApp(req, res, exchange, app))
  }

  /**
   * Step 3 of an event stream (C10): a token's request too once its verdict is valid with the operation's scope
   * (any other goes to the HttpApi for its 401 or 403); the query decoded here, the stream opened by its capability.
   */
  const openStream = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, operation: RouteOperation, stream: EventStream, app: AppHandler) => {
    let clientId: string | undefined
    if (req.headers.authorization !== undefined) {
      const verdict = exchange.bearer
      if (verdict === undefined || !("caller" in verdict) || (operation.scope !== undefined && !verdict.caller.scopes.includes(operation.scope))) {
        return toApp(req, res, exchange, app)
      }
      clientId = verdict.caller.clientId
    }
    if (operation.decodeQuery === undefined) return toApp(req, res, exchange, app)
    const decoded = operation.decodeQuery(req.url!)
    if (Exit.isFailure(decoded)) {
      const issue = Exit.findErrorOption(decoded)
      if (issue._tag === "None") return toApp(req, res, exchange, app)
      return writeProblem(req, res, exchange, "validation_failed", validationFailure(issue.value))
    }
    stream.open({ query: decoded.value, clientIp: exchange.clientIp, clientId }, {
      refuse: (code, extra) => writeProblem(req, res, exchange, code, extra),
      start: () => startStream(req, res, exchange)
    })
  }

  /** Counts one request against `key`: on success sets the RateLimit fields and goes on, else answers 429. */
  const count = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, policy: RateLimitPolicyName, key: string, limit: number, then: () => void) => {
    const decide = (counted: Exit.Exit<Decision, RateLimited>) => {
      if (Exit.isSuccess(counted)) {
        const headers = rateLimitHeaders(counted.value)
        // A second count (a token's tier after the address's) replaces the first one's fields.
        const at = exchange.headers.indexOf("ratelimit-policy")
        if (at === -1) exchange.headers.push("ratelimit-policy", headers["ratelimit-policy"], "ratelimit", headers.ratelimit)
        else exchange.headers.splice(at, 4, "ratelimit-policy", headers["ratelimit-policy"], "ratelimit", headers.ratelimit)
        return then()
      }
      const limited = Exit.findErrorOption(counted)
      if (limited._tag === "None" || !(limited.value instanceof RateLimited)) return defect(req, res, exchange, counted.cause)
      recordRateLimited(policy)
      send(req, res, exchange, rateLimitedResponse(policy, limit, limited.value, problemContext(exchange)))
    }
    const counted = counter.consume(key, limit)
    if (Exit.isExit(counted)) return decide(counted as Exit.Exit<Decision, RateLimited>)
    run(counted, { onExit: decide })
  }

  /** Step 2: counts the request against its operation's policy, then answers it. */
  const limitThenAnswer = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, operation: RouteOperation, app: AppHandler) => {
    const policy = operation.policy
    if (policy === undefined) return answer(req, res, exchange, operation, app)
    const [key, limit] = limitKey(policy, config.rateLimits[policy], undefined, exchange.clientIp)
    count(req, res, exchange, policy, key, limit, () => answer(req, res, exchange, operation, app))
  }

  /** Verifies the token; its verdict is kept for the Bearer middleware; `then` gets the caller when valid. */
  const verify = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, authorization: string, then: (caller: Caller | undefined) => void) =>
    run(bearer.verify(authorization), {
      onExit: (verdict) => {
        if (Exit.isFailure(verdict)) return defect(req, res, exchange, verdict.cause)
        if (verdict.value === undefined) return then(undefined)
        exchange.bearer = verdict.value
        then("caller" in verdict.value ? verdict.value.caller : undefined)
      }
    })

  /**
   * Step 2 with a token (C6): the token picks the tier, and limits are counted before a signature is
   * verified. A token unknown here is counted in the address's anonymous tier first: a flood of bad
   * tokens meets 429 without a verification once that tier is spent, and a valid token then moves to
   * its client's tier. A token that verified before is counted in its client's tier, then verified
   * again (a revoked client's tokens stop at once).
   */
  const bearerThenAnswer = (
    req: IncomingMessage,
    res: ServerResponse,
    exchange: Exchange,
    operation: RouteOperation,
    policy: RateLimitPolicyName,
    authorization: string,
    app: AppHandler
  ) => {
    const base = config.rateLimits[policy]
    const [anonymousKey, anonymousLimit] = limitKey(policy, base, undefined, exchange.clientIp)
    const go = () => answer(req, res, exchange, operation, app)
    const known = knownTokens.get(authorization)
    if (known !== undefined) {
      const [key, limit] = limitKey(policy, base, known, exchange.clientIp)
      return count(req, res, exchange, policy, key, limit, () =>
        verify(req, res, exchange, authorization, (caller) => {
          if (caller !== undefined) return go()
          knownTokens.forget(authorization)
          count(req, res, exchange, policy, anonymousKey, anonymousLimit, go)
        }))
    }
    count(req, res, exchange, policy, anonymousKey, anonymousLimit, () =>
      verify(req, res, exchange, authorization, (caller) => {
        if (caller === undefined) return go() // the Bearer middleware answers 401
        knownTokens.remember(authorization, caller)
        const [key, limit] = limitKey(policy, base, caller, exchange.clientIp)
        count(req, res, exchange, policy, key, limit, go)
      }))
  }

  const handle = (req: IncomingMessage, res: ServerResponse, handler: AppHandler) => {
    const started = performance.now()
    const app = req.headers["transfer-encoding"] === undefined ? handler : closeUnlessBodyRead(handler)
    const path = pathOf(req.url ?? "/")
    const route = routes.match(path)
    const exchange: Exchange = {
      requestId: requestIdOf(req.headers["x-request-id"] as string | undefined),
      clientIp: clientIpOf(req.headers["x-forwarded-for"] as string | undefined, req.socket.remoteAddress),
      route,
      path,
      started,
      headers: [],
      span: spans === undefined ? undefined : spans.start(req)
    }
    exchange.headers = edgeHeaders(req, exchange)
    setExchange(req, exchange)
    try {
      // Step 1: refusals decided by the method and headers alone, before any body is read.
      if (route === undefined) {
        return isAbsoluteForm(req.url!)
          ? toApp(req, res, exchange, app)
          : writeProblem(req, res, exchange, "not_found", { detail: `No resource exists at ${path}.` })
      }
      if (req.method === "OPTIONS") return preflight(req, res, route, exchange)
      const operation = route.operations[req.method!]
      if (!route.methods.includes(req.method!)) return refuseMethod(req, res, route, exchange)
      if (Number(req.headers["content-length"] ?? 0) > config.maxBodyBytes) {
        return refuse(req, res, exchange, "payload_too_large")
      }
      if (operation === undefined) return toApp(req, res, exchange, app) // a document page
      if (isEncodedBody(req) && route.public) {
        // RFC 9110 §15.5.16: a coding we cannot decode is 415 with Accept-Encoding.
        exchange.headers.push("accept-encoding", "identity")
        return writeProblem(req, res, exchange, "unsupported_media_type", contentCodingRefused)
      }
      const authorization = req.headers.authorization
      if (authorization === undefined || operation.policy === undefined) {
        return limitThenAnswer(req, res, exchange, operation, app)
      }
      bearerThenAnswer(req, res, exchange, operation, operation.policy, authorization, app)
    } catch (error) {
      defect(req, res, exchange, error)
    }
  }

  return Edge.of({ handle, endStreams: eventStreams.endAll })
})
