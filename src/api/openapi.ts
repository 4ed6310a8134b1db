/**
 * What the generated OpenAPI document cannot say by itself: headers of cross-cutting responses,
 * the oauth2 and Basic schemes, and the free-form nature of the rates bodies.
 */
import { Scopes } from "./schemas.ts"

type Json = Record<string, any>

/** Response headers the service sends, declared once (components.headers) and referenced where sent. */
const headers: Json = {
  "RateLimit-Policy": {
    description: "The limit counted (draft-ietf-httpapi-ratelimit-headers): `\"<policy>\";q=<requests>;w=<window seconds>`",
    schema: { type: "string", maxLength: 64 }
  },
  RateLimit: {
    description: "What is left of it: `\"<policy>\";r=<remaining>;t=<seconds until the window resets>`",
    schema: { type: "string", maxLength: 64 }
  },
  "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer", format: "int32", minimum: 0 } },
  Allow: { description: "Methods this path supports", schema: { type: "string", maxLength: 64 } },
  BearerChallenge: { description: "Bearer challenge (RFC 6750)", schema: { type: "string", maxLength: 256 } },
  ScopeChallenge: { description: "Bearer challenge naming the scope needed", schema: { type: "string", maxLength: 256 } },
  BasicChallenge: { description: "Basic challenge", schema: { type: "string", maxLength: 256 } },
  ETag: { description: "Strong validator of the body: send it back in If-None-Match for a 304", schema: { type: "string", maxLength: 64 } },
  "Cache-Control": {
    description: "How long browsers and shared caches may keep the answer: `public, max-age=<s>, stale-while-revalidate=<s>, stale-if-error=<s>`",
    schema: { type: "string", maxLength: 128 }
  }
}
const ref = (name: keyof typeof headers & string) => ({ $ref: `#/components/headers/${name}` })
const rateLimitFields = { "RateLimit-Policy": ref("RateLimit-Policy"), RateLimit: ref("RateLimit") }

/** Adds headers to a response, keeping those already declared. */
const declare = (response: Json | undefined, added: Json) => {
  if (response !== undefined) response.headers = { ...response.headers, ...added }
}

/**
 * A rate-limited operation: every answer after the edge's count carries the RateLimit fields. A 405 is
 * refused before counting, as are a 413 or 415 decided from the request headers alone.
 */
export const withRateLimitFields = (op: Json): Json => {
  for (const [status, response] of Object.entries<Json>(op.responses ?? {})) {
    if (status !== "405") declare(response, rateLimitFields)
  }
  return op
}

/**
 * A cacheable read (C4 "Cacheable reads"): its 200 carries ETag and Cache-Control, and a request whose
 * If-None-Match names the ETag gets 304 with both and no body; its problems are `no-store`.
 */
export const withCachingFields = (op: Json): Json => {
  const caching = { ETag: ref("ETag"), "Cache-Control": ref("Cache-Control") }
  declare(op.responses?.["200"], caching)
  op.parameters = [
    ...(op.parameters ?? []),
    { name: "If-None-Match", in: "header", required: false, description: "An ETag received before: 304 while it still names the answer", schema: { type: "string", maxLength: 1024 } }
  ]
  // A limited operation's 304 gets the RateLimit fields too (withRateLimitFields, applied after this).
  op.responses = { ...op.responses, "304": { description: "Not Modified: the answer is still the one the ETag names", headers: caching } }
  return op
}

/** The path of the operation with this id in the generated document (the contract states it once). */
const pathOf = (spec: Json, operationId: string): string | undefined =>
  Object.entries<Json>(spec.paths ?? {}).find(([, item]) =>
    Object.values<Json>(item).some((op) => typeof op === "object" && op?.operationId === operationId))?.[0]

const int32 = 2 ** 31

/**
 * Rules over every schema of the document: an integer says its width (int32 when its bounds fit, else
 * int64); a tuple (`prefixItems`) says nothing follows its items (`items: {not: {}}`, the spelling of
 * `false` that linters reading `items` as a schema object accept).
 */
const refineSchemas = (node: unknown): void => {
  if (Array.isArray(node)) return node.forEach(refineSchemas)
  if (typeof node !== "object" || node === null) return
  const schema = node as Json
  if (schema.type === "integer" && schema.format === undefined) {
    const fits = typeof schema.minimum === "number" && typeof schema.maximum === "number" &&
      schema.minimum >= -int32 && schema.maximum < int32
    schema.format = fits ? "int32" : "int64"
  }
  if (schema.type === "array" && Array.isArray(schema.prefixItems) && schema.items === undefined) schema.items = { not: {} }
  for (const value of Object.values(schema)) refineSchemas(value)
}

export const transformOpenApi = (spec: Json): Json => {
  const schemes = { ...spec.components?.securitySchemes }
  schemes.oauth2 = {
    type: "oauth2",
    description: "Client credentials for approved private integrations; credentials come from the operator.",
    flows: {
      clientCredentials: {
        tokenUrl: pathOf(spec, "requestToken"),
        scopes: {
          "health:read": "read service health",
          "rates:read": "read exchange-rate data",
          "subscriptions:write": "create newsletter subscriptions"
        } satisfies Record<(typeof Scopes)[number], string>
      }
    }
  }
  schemes.basicClient = { type: "http", scheme: "basic", description: "client_id and client_secret, form-urlencoded" }
  for (const item of Object.values<Json>(spec.paths ?? {})) {
    for (const op of Object.values<Json>(item)) {
      if (typeof op !== "object" || op === null || op.responses === undefined) continue
      // The public operations carry their own security (Api.ts, publicOperation).
      const token = op.operationId === "requestToken"
      // HTTP Basic, or none at the HTTP level: a private_key_jwt client's assertion is a form field (no scheme says so).
      if (token) op.security = [{ basicClient: [] }, {}]
      const r = op.responses
      declare(r["405"], { Allow: ref("Allow") })
      // Every 429 (the edge's and the token endpoint's) says when to retry and which limit was reached.
      declare(r["429"], { "Retry-After": ref("Retry-After"), ...rateLimitFields })
      declare(r["503"], { "Retry-After": ref("Retry-After") })
      declare(r["401"], { "WWW-Authenticate": ref(token ? "BasicChallenge" : "BearerChallenge") })
      declare(r["403"], { "WWW-Authenticate": ref("ScopeChallenge") })
    }
  }
  const schemas: Json = { ...spec.components?.schemas }
  for (const [name, schema] of Object.entries<Json>(schemas)) {
    if (name.endsWith("Encoded") && schema.properties?.code && schema.properties?.type) {
      schemas[name] = problemSchema(schema)
    }
  }
  // RFC 6749 §3.2: unknown token-request parameters are ignored, not refused.
  if (schemas.TokenRequest) delete schemas.TokenRequest.additionalProperties
  // Spec §2: the exchange-rate response is an object with additional properties allowed.
  if (schemas.ExchangeRatesResponse) delete schemas.ExchangeRatesResponse.additionalProperties
  schemas.ProblemDetails = genericProblem
  const components = { ...spec.components, schemas, headers: structuredClone(headers), securitySchemes: schemes }
  refineSchemas(components)
  return { ...spec, components }
}

/** The spec's ProblemDetails table: every member but `instance` required, extensions allowed. */
const problemSchema = (schema: Json): Json => {
  const { additionalProperties: _, ...rest } = schema
  const status = schema.properties.status?.enum?.[0]
  return {
    ...rest,
    // Each problem is a ProblemDetails (spec §2) with its own code, status and extension members.
    allOf: [{ $ref: "#/components/schemas/ProblemDetails" }],
    properties: {
      ...schema.properties,
      type: { ...schema.properties.type, format: "uri-reference" },
      instance: { type: "string", format: "uri-reference" },
      status: { type: "integer", enum: [status] }
    },
    required: ["type", "title", "status", "detail", "code", "resolution"]
  }
}

const genericProblem: Json = {
  type: "object",
  description: "RFC 9457 problem details; every error body of the API has this shape (application/problem+json).",
  properties: {
    type: { type: "string", format: "uri-reference" },
    title: { type: "string" },
    status: { type: "integer", minimum: 400, maximum: 599 },
    detail: { type: "string" },
    instance: { type: "string", format: "uri-reference" },
    code: { type: "string", pattern: "^[a-z0-9_]+$" },
    resolution: { type: "string" }
  },
  required: ["type", "title", "status", "detail", "code", "resolution"]
}
