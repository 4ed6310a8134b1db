/**
 * What the generated OpenAPI document cannot say by itself: headers of cross-cutting responses,
 * the oauth2 and Basic schemes, and the free-form nature of the rates bodies.
 */
import { Scopes } from "./schemas.ts"

type Json = Record<string, any>

const header = (description: string, schema: Json = { type: "string" }) => ({ description, schema })

/** The path of the operation with this id in the generated document (the contract states it once). */
const pathOf = (spec: Json, operationId: string): string | undefined =>
  Object.entries<Json>(spec.paths ?? {}).find(([, item]) =>
    Object.values<Json>(item).some((op) => typeof op === "object" && op?.operationId === operationId))?.[0]

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
      if (op.operationId === "requestToken") op.security = [{ basicClient: [] }]
      const r = op.responses
      if (r["405"]) r["405"].headers = { Allow: header("Methods this path supports") }
      for (const s of ["429", "503"]) {
        if (r[s]) r[s].headers = { "Retry-After": header("Seconds to wait", { type: "integer", minimum: 0 }) }
      }
      if (r["401"] && op.operationId !== "requestToken") {
        r["401"].headers = { "WWW-Authenticate": header("Bearer challenge (RFC 6750)") }
      }
      if (r["403"]) r["403"].headers = { "WWW-Authenticate": header("Bearer challenge naming the scope needed") }
      if (r["401"] && op.operationId === "requestToken") {
        r["401"].headers = { "WWW-Authenticate": header("Basic challenge") }
      }
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
  return { ...spec, components: { ...spec.components, schemas, securitySchemes: schemes } }
}

/** The spec's ProblemDetails table: every member but `instance` required, extensions allowed. */
const problemSchema = (schema: Json): Json => {
  const { additionalProperties: _, ...rest } = schema
  const status = schema.properties.status?.enum?.[0]
  return {
    ...rest,
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
