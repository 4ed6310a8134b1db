/**
 * The edge: the one request pipeline (CONTRACT C3, C7, C8, C9). Every request the server receives
 * crosses `Edge.handle`, which gives every response, whoever produces it, its request id, security
 * and CORS headers, its rate-limit count and fields, its access-log line and metrics:
 *
 *   1. refusals that need no operation: CORS preflight, 405 + Allow, 413, 415 (a content coding);
 *   2. the rate limit of the operation (per IP, or per client with a valid Bearer token);
 *   3. a ready answer a capability holds in memory (ReadyAnswers), or else the HttpApi app.
 *
 * It runs on Node's request event, before any fiber: a request answered in steps 1-3 costs no more
 * than the work it needs. The HttpApi side (apiErrors.ts) turns typed errors and defects into problems.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { Context, Effect, Exit, Layer } from "effect"
import type { HttpServerResponse } from "effect/http"
import type { Caller, RateLimitPolicyName } from "../api/Api.ts"
import { RateLimited } from "../api/problems.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { BearerAuth } from "../oauth/BearerAuth.ts"
import { asHttpResponse, refusalResponse } from "../oauth/tokenResponse.ts"
import { AccessLog } from "../observability/AccessLog.ts"
import { recordRateLimited, recordRequest } from "../observability/metrics.ts"
import { makeClientIp } from "./clientIp.ts"
import { type Exchange, setExchange } from "./exchange.ts"
import { KnownTokens } from "./knownTokens.ts"
import { problemResponse, type ProblemContext } from "./problemResponse.ts"
import { type Decision, limitKey, rateLimitedResponse, rateLimitHeaders, RequestCounter } from "./rateLimit.ts"
import { type ReadyAnswer, ReadyAnswers } from "./ReadyAnswers.ts"
import { requestIdOf } from "./requestId.ts"
import { makeRouteTable, type RouteMatch, type RouteOperation } from "./routeTable.ts"
import { readSmallJsonBody } from "./smallBody.ts"

/** Node's handler for the HttpApi app (NodeHttpServer.makeHandler): what the edge hands a request on to. */
export type AppHandler = (req: IncomingMessage, res: ServerResponse) => void

const exposedHeaders = "X-Request-Id, RateLimit, RateLimit-Policy, Retry-After, WWW-Authenticate"
const allowedRequestHeaders = "Content-Type, Authorization, X-Request-Id"
/** Bodies of ready answers are small queries; a larger one is a rarer request, left to the HttpApi. */
const maxReadyBody = 4096
const jsonContentType = /^application\/json\s*(;\s*charset=("?)utf-8\2\s*)?$/i

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

const hasBody = (req: IncomingMessage) =>
  Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined

/** A body in a content coding the service cannot undo (it reads bodies as sent): anything but `identity`. */
const isEncodedBody = (req: IncomingMessage) => {
  const coding = req.headers["content-encoding"]
  return coding !== undefined && hasBody(req) && !/^\s*(identity\s*)?$/i.test(coding)
}

/** Writes a response made here (problems, preflights, ready answers); the edge's headers are already set. */
const send = (res: ServerResponse, response: HttpServerResponse.HttpServerResponse) => {
  const body = response.body._tag === "Uint8Array" ? response.body.body : undefined
  const headers: Record<string, string | number> = { ...response.headers }
  if (body !== undefined) {
    headers["content-type"] = response.body._tag === "Uint8Array" ? response.body.contentType : "application/json"
    headers["content-length"] = body.byteLength
  }
  res.writeHead(response.status, headers)
  res.end(body)
}

const sendJson = (res: ServerResponse, body: string | Uint8Array) => {
  const bytes = typeof body === "string" ? Buffer.from(body) : body
  res.writeHead(200, { "content-type": "application/json", "content-length": bytes.byteLength })
  res.end(bytes)
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
}>()("app/Edge") {
  static readonly layer = Layer.effect(Edge, Effect.suspend(() => makeEdge))
}

const makeEdge = Effect.gen(function*() {
  const config = yield* AppConfig
  const accessLog = yield* AccessLog
  const counter = yield* RequestCounter
  const bearer = yield* BearerAuth
  const ready = new Map<string, ReadyAnswer>((yield* ReadyAnswers).map((answer) => [answer.operationId, answer]))
  const routes = makeRouteTable()
  const clientIpOf = makeClientIp(config.trustProxyRule)
  const knownTokens = new KnownTokens(config.tokenTtlSeconds)
  const run = Effect.runCallbackWith(yield* Effect.context<never>())
  const corsAll = config.corsOrigins === "*"
  const corsSet = new Set(corsAll ? [] : config.corsOrigins)
  const corsOrigin = (origin: string | undefined): string | undefined =>
    origin === undefined ? undefined : corsAll ? "*" : corsSet.has(origin) ? origin : undefined

  /** Defects never reach the wire (C7): logged with the request id, answered 500. */
  const defect = (res: ServerResponse, exchange: Exchange, cause: unknown) => {
    run(Effect.logError("unhandled error", cause).pipe(Effect.annotateLogs({ requestId: exchange.requestId })))
    if (!res.headersSent) send(res, problemResponse("internal_error", problemContext(exchange)))
    else res.destroy()
  }
  const problemContext = (exchange: Exchange): ProblemContext => ({ baseUrl: config.publicBaseUrl, requestId: exchange.requestId })
  /** A refusal made here, in the route's error form (C6: the token endpoint's are OAuth JSON). */
  const refusal = (exchange: Exchange, code: "method_not_allowed" | "payload_too_large", detail?: string) =>
    exchange.route?.errorForm === "oauth"
      ? asHttpResponse(refusalResponse({ publicBaseUrl: config.publicBaseUrl, requestId: exchange.requestId }, code, detail))
      : problemResponse(code, problemContext(exchange), detail === undefined ? undefined : { detail })

  /** Headers every response carries (C7, C9), set before anyone writes the response. */
  const setEdgeHeaders = (req: IncomingMessage, res: ServerResponse, exchange: Exchange) => {
    res.setHeader("x-request-id", exchange.requestId)
    res.setHeader("x-content-type-options", "nosniff")
    // A response that says otherwise (documents) overrides it.
    res.setHeader("cache-control", "no-store")
    const allowOrigin = exchange.route?.public === true ? corsOrigin(req.headers.origin) : undefined
    if (allowOrigin !== undefined) {
      res.setHeader("access-control-allow-origin", allowOrigin)
      res.setHeader("access-control-expose-headers", exposedHeaders)
      if (!corsAll) res.setHeader("vary", "Origin")
    }
  }

  /** The access-log line and metrics of every response, once Node is done with it (499: the client left). */
  const observe = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, path: string, started: number) =>
    res.once("close", () => {
      const status = res.writableFinished ? res.statusCode : 499
      const elapsedMs = performance.now() - started
      recordRequest(exchange.route?.pattern ?? "unmatched", req.method!, status, elapsedMs / 1000)
      accessLog.write({
        method: req.method!,
        path,
        status,
        durationMs: Math.round(elapsedMs * 1000) / 1000,
        requestId: exchange.requestId,
        clientIp: exchange.clientIp
      })
    })

  /** CORS preflight (Fetch standard): 204 for an allowed origin on a public operation, else 405. */
  const preflight = (req: IncomingMessage, res: ServerResponse, route: RouteMatch, exchange: Exchange) => {
    const requested = req.headers["access-control-request-method"]
    if (route.public && corsOrigin(req.headers.origin) !== undefined && requested !== undefined && route.methods.includes(requested)) {
      res.writeHead(204, {
        "access-control-allow-methods": route.methods.join(", "),
        "access-control-allow-headers": allowedRequestHeaders,
        "access-control-max-age": "600",
        "vary": "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
      })
      return void res.end()
    }
    refuseMethod(req, res, route, exchange)
  }

  const refuseMethod = (req: IncomingMessage, res: ServerResponse, route: RouteMatch, exchange: Exchange) => {
    res.setHeader("allow", route.methods.join(", "))
    send(res, refusal(exchange, "method_not_allowed", `${req.method} is not supported on this path.`))
  }

  /** Step 3: a ready answer when there is one for this request, else the HttpApi. */
  const answer = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, operation: RouteOperation, app: AppHandler) => {
    const readyAnswer = exchange.bearer === undefined ? ready.get(operation.operationId) : undefined
    if (readyAnswer === undefined) return app(req, res)
    const attempt = (body: unknown) => {
      try {
        const found = readyAnswer.answer(body)
        if (found === undefined) return false
        sendJson(res, found)
      } catch (error) {
        defect(res, exchange, error)
      }
      return true
    }
    if (req.method !== "POST") {
      if (!hasBody(req) && attempt(undefined)) return
      return app(req, res)
    }
    const length = Number(req.headers["content-length"])
    if (!(Number.isInteger(length) && length > 0 && length <= maxReadyBody) || req.headers["transfer-encoding"] !== undefined) {
      return app(req, res)
    }
    if (!jsonContentType.test(req.headers["content-type"] ?? "")) return app(req, res)
    // The body is put back when no ready answer fits: the HttpApi reads it as if nobody had.
    readSmallJsonBody(req, length, attempt, () => app(req, res))
  }

  /** Counts one request against `key`: on success sets the RateLimit fields and goes on, else answers 429. */
  const count = (res: ServerResponse, exchange: Exchange, policy: RateLimitPolicyName, key: string, limit: number, then: () => void) => {
    const decide = (counted: Exit.Exit<Decision, RateLimited>) => {
      if (Exit.isSuccess(counted)) {
        const headers = rateLimitHeaders(counted.value)
        res.setHeader("ratelimit-policy", headers["ratelimit-policy"])
        res.setHeader("ratelimit", headers.ratelimit)
        return then()
      }
      const limited = Exit.findErrorOption(counted)
      if (limited._tag === "None" || !(limited.value instanceof RateLimited)) return defect(res, exchange, counted.cause)
      recordRateLimited(policy)
      send(res, rateLimitedResponse(policy, limit, limited.value, problemContext(exchange)))
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
    count(res, exchange, policy, key, limit, () => answer(req, res, exchange, operation, app))
  }

  /** Verifies the token; its verdict is kept for the Bearer middleware; `then` gets the caller when valid. */
  const verify = (res: ServerResponse, exchange: Exchange, authorization: string, then: (caller: Caller | undefined) => void) =>
    run(bearer.authenticate(authorization, undefined), {
      onExit: (verdict) => {
        if (Exit.isSuccess(verdict)) {
          if (verdict.value._tag !== "Authenticated") return then(undefined)
          exchange.bearer = { caller: verdict.value.principal }
          return then(verdict.value.principal)
        }
        const error = Exit.findErrorOption(verdict)
        if (error._tag === "None" || error.value._tag !== "InvalidToken") return defect(res, exchange, verdict.cause)
        exchange.bearer = { invalid: error.value }
        then(undefined)
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
      return count(res, exchange, policy, key, limit, () =>
        verify(res, exchange, authorization, (caller) => {
          if (caller !== undefined) return go()
          knownTokens.forget(authorization)
          count(res, exchange, policy, anonymousKey, anonymousLimit, go)
        }))
    }
    count(res, exchange, policy, anonymousKey, anonymousLimit, () =>
      verify(res, exchange, authorization, (caller) => {
        if (caller === undefined) return go() // the Bearer middleware answers 401
        knownTokens.remember(authorization, caller)
        const [key, limit] = limitKey(policy, base, caller, exchange.clientIp)
        count(res, exchange, policy, key, limit, go)
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
      route
    }
    setExchange(req, exchange)
    setEdgeHeaders(req, res, exchange)
    observe(req, res, exchange, path, started)
    try {
      // Step 1: refusals decided by the method and headers alone, before any body is read.
      if (route === undefined) return app(req, res) // the HttpApi answers 404 with a problem
      if (req.method === "OPTIONS") return preflight(req, res, route, exchange)
      const operation = route.operations[req.method!]
      if (!route.methods.includes(req.method!)) return refuseMethod(req, res, route, exchange)
      if (Number(req.headers["content-length"] ?? 0) > config.maxBodyBytes) {
        return send(res, refusal(exchange, "payload_too_large"))
      }
      if (operation === undefined) return app(req, res) // a document page
      if (isEncodedBody(req) && route.public) {
        // RFC 9110 §15.5.16: a coding we cannot decode is 415 with Accept-Encoding.
        res.setHeader("accept-encoding", "identity")
        return send(res, problemResponse("unsupported_media_type", problemContext(exchange), {
          detail: "Content-Encoding is not supported; send the body uncompressed."
        }))
      }
      const authorization = req.headers.authorization
      if (authorization === undefined || operation.policy === undefined) {
        return limitThenAnswer(req, res, exchange, operation, app)
      }
      bearerThenAnswer(req, res, exchange, operation, operation.policy, authorization, app)
    } catch (error) {
      defect(res, exchange, error)
    }
  }

  return Edge.of({ handle })
})
