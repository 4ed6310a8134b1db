/**
 * The typed client for integrators, derived from the same HttpApi as the server. Problems come back as
 * the classes of src/api/problems.ts (`UpstreamError`, `ServiceUnavailable`, ...), token-endpoint errors
 * as `OAuthError`: every failure has a `_tag` for `Effect.catchTag`.
 *
 *   const api = yield* makeApiClient({ baseUrl, clientCredentials: { clientId, clientSecret } })
 *   const token = yield* api.requestToken({ payload: { grant_type: "client_credentials", scope: "rates:read" } })
 *   const rates = yield* (yield* makeApiClient({ baseUrl, accessToken: token.access_token }))
 *     .getHistoricalExchangeRates({ payload: { cryptos: ["BTC"] } })
 *
 * Shipped compiled (`npm run pack:client`, see src/client/build.ts): this file and src/api/ only, so it
 * must import nothing but `effect` (no `node:` modules, no server code) and run in a browser as on Node 20.
 */
import { Effect, Redacted, Schema } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { Api } from "./api/Api.ts"
import { OAuthErrorCode, type TokenRequest, type TokenResponse } from "./api/schemas.ts"

export { Api } from "./api/Api.ts"
export * from "./api/problems.ts"
export * from "./api/schemas.ts"

/**
 * An error of `POST /oauth/token` (RFC 6749 §5.2 members and the problem members, CONTRACT C6), typed:
 * `error` is the OAuth code (`invalid_client`, `invalid_scope`, ...); `code` is the problem code, the same
 * except when too many failed requests were made (`status` 429, `code` `rate_limited`, `retryAfter` set).
 */
export class OAuthError extends Schema.TaggedError<OAuthError>()("OAuthError", {
  error: OAuthErrorCode,
  error_description: Schema.String,
  status: Schema.Int,
  code: Schema.String,
  type: Schema.String,
  title: Schema.String,
  detail: Schema.String,
  resolution: Schema.String,
  instance: Schema.optionalKey(Schema.String),
  /** Seconds to wait, from the `Retry-After` header of a 429. */
  retryAfter: Schema.optionalKey(Schema.Int)
}) {}

/** Client credentials for `requestToken`, sent as HTTP Basic (`client_secret_basic`). */
export interface ClientCredentials {
  readonly clientId: string
  readonly clientSecret: string | Redacted.Redacted<string>
}

export interface ApiClientOptions {
  /** The service's base URL, e.g. `https://api.example.com` (no trailing `/api`). */
  readonly baseUrl: string
  /** A Bearer token for the public operations (from `requestToken`); without it, calls are anonymous. */
  readonly accessToken?: string | Redacted.Redacted<string> | undefined
  /** What `requestToken` authenticates with; required to call it. */
  readonly clientCredentials?: ClientCredentials | undefined
}

type DerivedClient = HttpApiClient.ForApi<typeof Api>
type DerivedTokenError = DerivedClient["requestToken"] extends
  (...args: ReadonlyArray<any>) => Effect.Effect<infer _A, infer E, infer _R> ? E : never
type OAuthErrorBody = Extract<DerivedTokenError, { readonly error_description: string }>

/** What `requestToken` takes: the form parameters of RFC 6749 §4.4.2. */
export interface RequestTokenInput {
  readonly payload: typeof TokenRequest.Type
}

/** The client derived from the HttpApi; `requestToken` sends the client credentials and fails with `OAuthError`. */
export type ApiClient = Omit<DerivedClient, "requestToken"> & {
  readonly requestToken: (
    request: RequestTokenInput
  ) => Effect.Effect<typeof TokenResponse.Type, Exclude<DerivedTokenError, OAuthErrorBody> | OAuthError>
}

/**
 * The server sends absolute problem `type` URIs (PUBLIC_BASE_URL/problems/<code>); the contract
 * declares them relative, so they are made relative again before the problem classes decode them.
 */
const relativeProblemTypes = (response: HttpClientResponse.HttpClientResponse) => {
  if (!(response.headers["content-type"] ?? "").startsWith("application/problem+json")) {
    return Effect.succeed(response)
  }
  return Effect.map(response.text, (text) => {
    let body = text
    try {
      const json = JSON.parse(text)
      if (typeof json?.type === "string") {
        const at = json.type.indexOf("/problems/")
        if (at > 0) json.type = json.type.slice(at)
      }
      body = JSON.stringify(json)
    } catch {
      // not JSON after all: let the decoder report it
    }
    return HttpClientResponse.fromWeb(
      response.request,
      new Response(body, { status: response.status, headers: response.headers as Record<string, string> })
    )
  })
}

/** RFC 6749 §2.3.1: the id and the secret are form-urlencoded before they are joined and base64-encoded. */
const formEncode = (value: string) =>
  encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, "+")

const withBasic = (credentials: ClientCredentials | undefined) => (client: HttpClient.HttpClient) =>
  credentials === undefined ? client : HttpClient.mapRequest(
    client,
    HttpClientRequest.basicAuth(
      formEncode(credentials.clientId),
      formEncode(Redacted.isRedacted(credentials.clientSecret)
        ? Redacted.value(credentials.clientSecret)
        : credentials.clientSecret)
    )
  )

const isOAuthErrorBody = (error: unknown): error is OAuthErrorBody =>
  typeof error === "object" && error !== null && !("_tag" in error) && "error" in error &&
  "error_description" in error

const decodeTokenResponse = HttpApiClient.decodeResponse(Api, { group: "oauth", endpoint: "requestToken" })

const retryAfterOf = (response: HttpClientResponse.HttpClientResponse) => {
  const value = response.headers["retry-after"]
  return value !== undefined && /^\d+$/.test(value) ? { retryAfter: Number(value) } : {}
}

export const makeApiClient = (options: ApiClientOptions): Effect.Effect<ApiClient, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const http = HttpClient.transformResponse(yield* HttpClient.HttpClient, Effect.flatMap(relativeProblemTypes))
    const token = options.accessToken
    const client = yield* HttpApiClient.makeWith(Api, {
      baseUrl: options.baseUrl,
      httpClient: token === undefined ? http : HttpClient.mapRequest(http, HttpClientRequest.bearerToken(token))
    })
    // The token endpoint gets the Basic credentials and never the Bearer token.
    const tokenEndpoint = yield* HttpApiClient.endpoint(Api, {
      group: "oauth",
      endpoint: "requestToken",
      baseUrl: options.baseUrl,
      httpClient: withBasic(options.clientCredentials)(http)
    })
    const requestToken: ApiClient["requestToken"] = (request) =>
      Effect.flatMap(
        tokenEndpoint({ payload: request.payload, responseMode: "response-only" }),
        (response) =>
          decodeTokenResponse(response).pipe(
            Effect.catchIf(
              isOAuthErrorBody,
              (body) => Effect.fail(new OAuthError({ ...body, ...retryAfterOf(response) }))
            )
          )
      ) as ReturnType<ApiClient["requestToken"]>
    return { ...client, requestToken }
  })
