/**
 * The fast lane (issue 7). The hottest requests — GET/HEAD /api/health, an exchange-rates query
 * answered moments ago — are answered straight from node:http: no fiber, no HttpApi middleware
 * chain, no schema pass on the way out. That is most of the CPU such a request costs.
 *
 * It does for them exactly what the Effect path does, with the same functions where they are pure:
 * the request id rule, the rate-limit count in the same in-process store (so both lanes share every
 * count) with its RateLimit fields and its 429 problem, the edge's headers, the access-log line and
 * the metrics. It serves only what it is sure of; anything else goes to the Effect app untouched:
 * a token or an Origin (per-client tier, CORS), a body it cannot take as is, an answer not held in
 * memory. A body it has read is put back before handing over.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { Cause, Context, Effect, Exit, Layer } from "effect"
import type { HttpServerResponse } from "effect/http"
import type { RateLimitPolicyName } from "../api/Api.ts"
import { RateLimited } from "../api/problems.ts"
import { AppConfig } from "../config.ts"
import { AccessLog } from "../observability/AccessLog.ts"
import { clientIpFrom } from "./clientIp.ts"
import { recordRateLimited, recordRequest } from "../observability/metrics.ts"
import { problemResponse } from "./problemResponse.ts"
import { type Decision, limitKey, rateLimitHeaders, RequestCounter, WindowSeconds } from "./rateLimit.ts"
import { requestIdOf } from "./requestId.ts"

/** One operation the fast lane may answer. Built by its capability (health/, rates/). */
export interface FastRoute {
  /** Exact request target, no query string. */
  readonly path: string
  readonly methods: ReadonlyArray<"GET" | "HEAD" | "POST">
  readonly policy: RateLimitPolicyName
  /** POST routes read a JSON body of at most this many bytes; larger ones take the Effect path. */
  readonly maxBody?: number
  /**
   * The 200 JSON body for this request, or undefined to hand it to the Effect path. Synchronous and
   * without side effects: it runs before the request is counted.
   */
  readonly answer: (body: Buffer | undefined) => string | Uint8Array | undefined
}

type Next = () => void

export class FastLane extends Context.Service<FastLane, {
  /** Answers the request, or calls `next` (at once, or after reading a body it then put back). */
  readonly handle: (req: IncomingMessage, res: ServerResponse, next: Next) => void
}>()("app/FastLane") {
  /** Every request to the Effect app: for tests and for FAST_LANE=off. */
  static readonly off = Layer.succeed(FastLane)({ handle: (_req, _res, next) => next() })
}

const jsonContentType = /^application\/json\s*(;\s*charset=("?)utf-8\2\s*)?$/i

/** The edge's headers for a 200 (edge.ts sets the same ones), then the RateLimit fields. */
const okHeaders = (length: number, requestId: string, decision: Decision) => {
  const limits = rateLimitHeaders(decision)
  return [
    "content-type", "application/json",
    "content-length", String(length),
    "x-request-id", requestId,
    "x-content-type-options", "nosniff",
    "cache-control", "no-store",
    "ratelimit-policy", limits["ratelimit-policy"],
    "ratelimit", limits.ratelimit
  ]
}

/**
 * The lane for a set of routes. It counts in the same RequestCounter as the RateLimit middleware:
 * synchronously when the store is in this process, else (Redis) with one fiber for the round trip,
 * answering once the count is in.
 */
export const makeFastLane = (routes: ReadonlyArray<FastRoute>) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const accessLog = yield* AccessLog
    const counter = yield* RequestCounter
    if (!config.fastLane || routes.length === 0) return FastLane.of({ handle: (_req, _res, next) => next() })
    const byPath = new Map(routes.map((route) => [route.path, route] as const))
    // The shared store's fallback logs through the application's logger: run its count in this context.
    const runCount = Effect.runCallbackWith(yield* Effect.context<never>())
    const runLog = Effect.runForkWith(yield* Effect.context<never>())

    const finish = (
      req: IncomingMessage,
      route: FastRoute,
      status: number,
      started: number,
      requestId: string,
      ip: string
    ) => {
      const elapsedMs = performance.now() - started
      recordRequest(route.path, req.method!, status, elapsedMs / 1000)
      accessLog.write({
        method: req.method!,
        path: route.path,
        status,
        durationMs: Math.round(elapsedMs * 1000) / 1000,
        requestId,
        clientIp: ip
      })
    }

    /** A complete problem with the edge's headers (edge.ts sets the same ones). */
    const writeProblem = (res: ServerResponse, problem: HttpServerResponse.HttpServerResponse, requestId: string, extra: Record<string, string>) => {
      const bytes = problem.body._tag === "Uint8Array" ? problem.body.body : new Uint8Array()
      res.writeHead(problem.status, {
        ...problem.headers,
        "content-type": problem.body._tag === "Uint8Array" ? problem.body.contentType : "application/problem+json",
        "content-length": String(bytes.byteLength),
        "x-request-id": requestId,
        "x-content-type-options": "nosniff",
        ...extra
      })
      res.end(bytes)
    }

    /**
     * Counts the request and answers it: 200 with `body`, or the 429 the RateLimit middleware gives.
     * False, with nothing written, if an in-process count failed otherwise (a defect): the Effect path
     * then takes the request and reports it. Counted in Redis, the request is taken for good.
     */
    const respond = (req: IncomingMessage, res: ServerResponse, route: FastRoute, body: string | Uint8Array, started: number): boolean => {
      const requestId = requestIdOf(req.headers["x-request-id"] as string | undefined)
      const ip = clientIpFrom(req.headers["x-forwarded-for"] as string | undefined, req.socket.remoteAddress, config.trustProxy)
      const [key, limit] = limitKey(route.policy, config.rateLimits[route.policy], undefined, ip)
      const ctx = { baseUrl: config.publicBaseUrl, requestId }

      /** Writes the answer the count calls for; false when the count failed with a defect. */
      const reply = (counted: Exit.Exit<Decision, RateLimited>): boolean => {
        if (Exit.isSuccess(counted)) {
          const bytes = typeof body === "string" ? Buffer.from(body) : body
          res.writeHead(200, okHeaders(bytes.byteLength, requestId, counted.value))
          res.end(bytes)
          finish(req, route, 200, started, requestId, ip)
          return true
        }
        const limited = Cause.squash(counted.cause)
        if (!(limited instanceof RateLimited)) return false
        recordRateLimited(route.policy)
        const retryAfter = limited.retryAfter ?? WindowSeconds
        writeProblem(
          res,
          problemResponse("rate_limited", ctx, { detail: limited.detail, retryAfter }),
          requestId,
          rateLimitHeaders({ policy: route.policy, limit, remaining: 0, resetSeconds: retryAfter })
        )
        finish(req, route, 429, started, requestId, ip)
        return true
      }

      if (counter.consumeNow !== undefined) return reply(counter.consumeNow(key, limit))
      runCount(counter.consume(key, limit), {
        onExit: (counted) => {
          let cause: unknown = counted._tag === "Failure" ? counted.cause : undefined
          try {
            if (reply(counted)) return
          } catch (error) {
            cause = error
          }
          // Defects never reach the wire (as at the edge): logged with the request id, answered 500.
          runLog(Effect.logError("unhandled error", cause).pipe(Effect.annotateLogs({ requestId })))
          if (res.headersSent) return
          writeProblem(res, problemResponse("internal_error", ctx), requestId, {})
          finish(req, route, 500, started, requestId, ip)
        }
      })
      return true
    }

    /** Whether the route answered; a throw is a bug of ours, left to the Effect path to answer. */
    const answered = (req: IncomingMessage, res: ServerResponse, route: FastRoute, body: Buffer | undefined, started: number) => {
      try {
        const answer = route.answer(body)
        return answer !== undefined && respond(req, res, route, answer, started)
      } catch {
        return res.headersSent
      }
    }

    /** Reads a small body without consuming it for good: when the route declines, it is put back. */
    const withBody = (req: IncomingMessage, res: ServerResponse, route: FastRoute, length: number, started: number, next: Next) => {
      const chunks: Array<Buffer> = []
      let size = 0
      const done = () => {
        req.off("readable", onReadable)
        req.off("error", onGone)
        req.off("close", onGone)
      }
      const onGone = () => {
        // The client went away mid-body: the Effect path sees what it would have seen.
        done()
        if (chunks.length > 0) req.unshift(Buffer.concat(chunks))
        next()
      }
      const onReadable = () => {
        let chunk: Buffer | null
        while (size < length && (chunk = req.read() as Buffer | null) !== null) {
          chunks.push(chunk)
          size += chunk.length
        }
        if (size < length) return
        done()
        const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
        if (answered(req, res, route, body, started)) return
        // Synchronously, before 'end' is due (Readable checks for "one last unshift"), so the
        // Effect path reads the body as if nobody had.
        req.unshift(body)
        next()
      }
      req.on("readable", onReadable)
      req.on("error", onGone)
      req.on("close", onGone)
    }

    const handle = (req: IncomingMessage, res: ServerResponse, next: Next) => {
      const route = byPath.get(req.url!)
      if (route === undefined || !route.methods.includes(req.method as "GET")) return next()
      const headers = req.headers
      if (
        headers.authorization !== undefined || headers.origin !== undefined ||
        headers["content-encoding"] !== undefined || headers["transfer-encoding"] !== undefined
      ) return next()
      const started = performance.now()
      const length = headers["content-length"] === undefined ? 0 : Number(headers["content-length"])
      if (route.maxBody === undefined) {
        if (length !== 0 || !answered(req, res, route, undefined, started)) next()
        return
      }
      if (!(Number.isInteger(length) && length > 0 && length <= route.maxBody)) return next()
      if (!jsonContentType.test(headers["content-type"] ?? "")) return next()
      withBody(req, res, route, length, started, next)
    }

    return FastLane.of({ handle })
  })

/** The lane as a Layer, from routes built by the capabilities. */
export const fastLaneLayer = <R>(routes: Effect.Effect<ReadonlyArray<FastRoute>, never, R>) =>
  Layer.effect(FastLane, Effect.flatMap(routes, makeFastLane))
