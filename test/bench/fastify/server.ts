/**
 * The benchmark's Fastify peer: the service's public contract (CONTRACT C3, C4, C5, C7, C8) written the
 * way most Node teams ship it, so that `npm run bench` can say what the service costs next to it:
 * Fastify 5, ajv validation from the JSON schemas of the service's own /openapi.json, problem+json errors
 * of the same shape, pino request logs (Fastify's default "incoming request" / "request completed"
 * lines, on stdout: the bench sends it to /dev/null), @fastify/rate-limit in memory, and the cached rates
 * answer from a Map (the same bytes as the service's cached answer). Health is computed per request.
 *
 *   PORT=N node test/bench/fastify/server.ts <contract.json>     prints "listening <port>" on stderr
 *
 * Fastify closes the connection after a body it could not parse (a malformed JSON body included): kept,
 * since that is how it ships. Left out on purpose (no bench scenario reaches them): Bearer tokens, CORS,
 * the upstream (a query the Map does not hold answers 503 service_unavailable). Runs on Node 24's type
 * stripping.
 */
import { randomUUID } from "node:crypto"
import { readFileSync } from "node:fs"
import rateLimit from "@fastify/rate-limit"
import Fastify, { type FastifyError, type FastifyReply, type FastifyRequest } from "fastify"

/** What test/bench/bench.ts hands the peer: everything it takes from the service. */
export interface PeerContract {
  /** `environment` of the health answer. */
  readonly environment: string
  /** The problem catalogue (src/api/problems.ts): title, resolution and default detail per code. */
  readonly problems: Readonly<Record<string, { readonly status: number; readonly title: string; readonly resolution: string; readonly detail: string }>>
  /** Request and response schemas, from the service's /openapi.json components. */
  readonly schemas: {
    readonly exchangeRatesRequest: object
    readonly subscribeRequest: object
    readonly healthResponse: object
  }
  /** Requests per minute and IP (the values the bench gives the service). */
  readonly rateLimits: { readonly rates: number; readonly subscribe: number }
  readonly maxBodyBytes: number
  /** Cached rates answers: the request body that was asked and the service's answer bytes (base64). */
  readonly ratesAnswers: ReadonlyArray<{ readonly requestBody: string; readonly body: string }>
}

const file = process.argv[2]
if (file === undefined) {
  process.stderr.write("usage: node test/bench/fastify/server.ts <contract.json>\n")
  process.exit(2)
}
const contract = JSON.parse(readFileSync(file, "utf8")) as PeerContract
const port = Number(process.env.PORT ?? 0)
const host = "127.0.0.1"
let baseUrl = `http://${host}:${port}`

interface RatesQuery {
  readonly cryptos: ReadonlyArray<string>
  readonly currency?: string
  readonly days?: number
}
/** C4: symbols upper-cased and de-duplicated, order kept; currency case-insensitive; defaults usd / 30. */
const ratesKey = (q: RatesQuery) => `${(q.currency ?? "usd").toLowerCase()}|${q.days ?? 30}|${[...new Set(q.cryptos.map((s) => s.toUpperCase()))].join(",")}`
const ratesCache = new Map<string, Buffer>()
for (const a of contract.ratesAnswers) ratesCache.set(ratesKey(JSON.parse(a.requestBody) as RatesQuery), Buffer.from(a.body, "base64"))

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const app = Fastify({
  logger: { level: "info" },
  bodyLimit: contract.maxBodyBytes,
  // A client's X-Request-Id is echoed when it is a UUID (C7).
  genReqId: (req) => {
    const given = req.headers["x-request-id"]
    return typeof given === "string" && uuid.test(given) ? given.toLowerCase() : randomUUID()
  },
  // Extra members are refused where the schema says so (C5), not silently removed; no type coercion.
  ajv: { customOptions: { removeAdditional: false, coerceTypes: false } }
})

interface FieldError {
  readonly pointer: string
  readonly detail: string
}

const problem = (request: FastifyRequest, reply: FastifyReply, code: string, detail?: string, errors?: ReadonlyArray<FieldError>) => {
  const p = contract.problems[code] ?? contract.problems.internal_error!
  return reply.code(p.status).type("application/problem+json").send({
    type: `${baseUrl}/problems/${code}`,
    title: p.title,
    status: p.status,
    detail: detail ?? p.detail,
    instance: `urn:uuid:${request.id}`,
    code,
    resolution: p.resolution,
    ...(errors === undefined ? {} : { errors })
  })
}

// C8: a POST operation takes JSON only; Fastify would otherwise parse text/plain too (415 without it).
app.removeContentTypeParser("text/plain")

app.addHook("onRequest", async (request, reply) => {
  reply.header("x-request-id", request.id)
  reply.header("x-content-type-options", "nosniff")
  reply.header("cache-control", "no-store")
})

await app.register(rateLimit, {
  global: false,
  enableDraftSpec: true,
  errorResponseBuilder: (_request, context) => Object.assign(new Error("rate limited"), { statusCode: 429, code: "rate_limited", retryAfter: context.after })
})

app.setErrorHandler((error: FastifyError & { retryAfter?: string }, request, reply) => {
  if (error.validation !== undefined) {
    const errors = error.validation.map((v) => {
      const params = v.params as { missingProperty?: string; additionalProperty?: string }
      const member = params.missingProperty ?? params.additionalProperty
      return { pointer: member === undefined ? v.instancePath : `${v.instancePath}/${member}`, detail: v.message ?? "is invalid" }
    })
    return problem(request, reply, "validation_failed", errors.map((e) => `${e.pointer || "/"}: ${e.detail}`).join("; "), errors)
  }
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return problem(request, reply, "malformed_json")
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return problem(request, reply, "payload_too_large")
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return problem(request, reply, "unsupported_media_type")
    case "rate_limited":
      return problem(request, reply, "rate_limited")
  }
  request.log.error(error)
  return problem(request, reply, "internal_error")
})

app.setNotFoundHandler((request, reply) => problem(request, reply, "not_found", `No resource exists at ${request.url.split("?")[0]}.`))

/** C3: another method on a known path is 405 with Allow (Fastify alone would answer 404). */
const allowOnly = (url: string, allowed: ReadonlyArray<string>) => {
  const allow = allowed.join(", ")
  app.route({
    method: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"].filter((m) => !allowed.includes(m)),
    url,
    handler: (request, reply) => {
      reply.header("allow", allow)
      return problem(request, reply, "method_not_allowed", `${request.method} is not supported on this path.`)
    }
  })
}

const startedAt = performance.now()

app.get("/api/health", {
  schema: { response: { 200: contract.schemas.healthResponse } }
}, async () => ({
  status: "healthy",
  timestamp: new Date().toISOString(),
  uptime: Math.round(performance.now() - startedAt) / 1000,
  environment: contract.environment
}))
allowOnly("/api/health", ["GET", "HEAD"])

app.post("/api/v1/exchange-rates", {
  schema: { body: contract.schemas.exchangeRatesRequest },
  config: { rateLimit: { max: contract.rateLimits.rates, timeWindow: 60_000 } }
}, async (request, reply) => {
  const cached = ratesCache.get(ratesKey(request.body as RatesQuery))
  if (cached === undefined) {
    reply.header("retry-after", "30")
    return problem(request, reply, "service_unavailable")
  }
  return reply.type("application/json").send(cached)
})
allowOnly("/api/v1/exchange-rates", ["POST"])

const subscribers = new Set<string>()
app.post("/api/subscribe", {
  schema: { body: contract.schemas.subscribeRequest },
  config: { rateLimit: { max: contract.rateLimits.subscribe, timeWindow: 60_000 } }
}, async (request) => {
  const { email } = request.body as { email: string }
  const at = email.lastIndexOf("@")
  subscribers.add(`${email.slice(0, at)}@${email.slice(at + 1).toLowerCase()}`)
  return { success: true }
})
allowOnly("/api/subscribe", ["POST"])

await app.listen({ port, host })
const address = app.server.address()
const bound = typeof address === "object" && address !== null ? address.port : port
baseUrl = `http://${host}:${bound}`
process.stderr.write(`listening ${bound}\n`)

const stop = () => {
  setTimeout(() => process.exit(0), 2_000).unref()
  void app.close().then(() => process.exit(0))
}
process.once("SIGTERM", stop)
process.once("SIGINT", stop)
