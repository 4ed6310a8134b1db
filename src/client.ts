/**
 * The typed client for integrators, derived from the same HttpApi as the server. Problems come back as
 * the classes of src/api/problems.ts (`UpstreamError`, `ServiceUnavailable`, ...), token-endpoint errors
 * as `OAuthError`: every failure has a `_tag` for `Effect.catchTag`.
 *
 *   const api = yield* makeApiClient({ baseUrl, clientCredentials: { clientId, clientSecret } })
 *   // or, a private_key_jwt client: clientCredentials: { clientId, privateKey, kid } (a CryptoKey or a private JWK)
 *   const token = yield* api.requestToken({ payload: { grant_type: "client_credentials", scope: "rates:read" } })
 *   const rates = yield* (yield* makeApiClient({ baseUrl, accessToken: token.access_token }))
 *     .getHistoricalExchangeRates({ payload: { cryptos: ["BTC"] } })
 *   // the same as a cacheable GET (GET /api/v1/rates?cryptos=BTC,ETH&days=7: a CDN or the browser may answer it)
 *   const cached = yield* api.getExchangeRates({ query: { cryptos: ["BTC", "ETH"], days: 7 } })
 *
 * Shipped compiled (`npm run pack:client`, see src/client/build.ts): this file and src/api/ only, so it
 * must import nothing but `effect` (no `node:` modules, no server code) and run in a browser as on Node 20.
 */
import { Effect, Redacted, Schema, Stream } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { Api } from "./api/Api.ts"
import { JwtBearerAssertionType, OAuthErrorCode, type PriceStreamEvent, type TokenRequest, type TokenResponse } from "./api/schemas.ts"

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

/**
 * A `private_key_jwt` client's key (RFC 7523): `requestToken` signs a fresh client assertion with it for
 * every request (iss and sub the client id, aud the issuer, a minute of life, a random jti). The service
 * holds only the public key; the private key never leaves this process (Web Crypto: Node 20+, browsers).
 */
export interface PrivateKeyCredentials {
  readonly clientId: string
  /** A Web Crypto private key (`sign` usage), or a private JWK (RSA, EC P-256 or Ed25519). */
  readonly privateKey: CryptoKey | JsonWebKey
  /** The `kid` of the registered public key (recommended: the service finds the key by it). */
  readonly kid?: string | undefined
  /** RS256, PS256, ES256 or EdDSA; by default the key's (an RSA key: its JWK `alg`, else RS256). */
  readonly alg?: AssertionAlgorithm | undefined
  /** The assertions' `aud`: the issuer, which is `baseUrl` unless the service is reached at another address. */
  readonly audience?: string | undefined
}

type AssertionAlgorithm = "RS256" | "PS256" | "ES256" | "EdDSA"

/** A private key could not sign a client assertion (an unsupported key or algorithm). */
export class ClientAssertionError extends Schema.TaggedError<ClientAssertionError>()("ClientAssertionError", {
  message: Schema.String
}) {}

export interface ApiClientOptions {
  /** The service's base URL, e.g. `https://api.example.com` (no trailing `/api`). */
  readonly baseUrl: string
  /** A Bearer token for the public operations (from `requestToken`); without it, calls are anonymous. */
  readonly accessToken?: string | Redacted.Redacted<string> | undefined
  /** What `requestToken` authenticates with (a secret, or a private key); required to call it. */
  readonly clientCredentials?: ClientCredentials | PrivateKeyCredentials | undefined
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
  /**
   * GET /api/v1/prices/stream (C10) as an async iterable of its typed events (`snapshot`, then `price`): refusals fail
   * the Effect as the contract's problems, before any event; end the iteration (`break`) to close the stream.
   */
  readonly priceEvents: (query: Parameters<DerivedClient["streamPrices"]>[0]["query"]) => Effect.Effect<
    AsyncIterable<typeof PriceStreamEvent.Type>,
    DerivedClient["streamPrices"] extends (...args: ReadonlyArray<any>) => Effect.Effect<infer _A, infer E, infer _R> ? E : never
  >
  readonly requestToken: (
    request: RequestTokenInput
  ) => Effect.Effect<typeof TokenResponse.Type, Exclude<DerivedTokenError, OAuthErrorBody> | OAuthError | ClientAssertionError>
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

const withBasic = (credentials: ClientCredentials | PrivateKeyCredentials | undefined) => (client: HttpClient.HttpClient) =>
  credentials === undefined || !("clientSecret" in credentials) ? client : HttpClient.mapRequest(
    client,
    HttpClientRequest.basicAuth(
      formEncode(credentials.clientId),
      formEncode(Redacted.isRedacted(credentials.clientSecret)
        ? Redacted.value(credentials.clientSecret)
        : credentials.clientSecret)
    )
  )

// ---- private_key_jwt: a compact JWS signed with Web Crypto (the package may depend on effect alone).

const webCrypto: Record<AssertionAlgorithm, { readonly key: RsaHashedImportParams | EcKeyImportParams | Algorithm; readonly sign: Algorithm }> = {
  RS256: { key: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, sign: { name: "RSASSA-PKCS1-v1_5" } },
  PS256: { key: { name: "RSA-PSS", hash: "SHA-256" }, sign: { name: "RSA-PSS", saltLength: 32 } as Algorithm },
  ES256: { key: { name: "ECDSA", namedCurve: "P-256" }, sign: { name: "ECDSA", hash: "SHA-256" } as Algorithm },
  EdDSA: { key: { name: "Ed25519" }, sign: { name: "Ed25519" } }
}

/** The algorithm a key signs with here: RSA (PKCS #1 v1.5 or PSS), ECDSA on P-256, Ed25519; else none. */
const algorithmOf = (key: CryptoKey | JsonWebKey): AssertionAlgorithm | undefined => {
  if ("algorithm" in key) {
    const { name, namedCurve } = key.algorithm as EcKeyAlgorithm
    if (name === "ECDSA") return namedCurve === "P-256" ? "ES256" : undefined
    return ({ "RSASSA-PKCS1-v1_5": "RS256", "RSA-PSS": "PS256", Ed25519: "EdDSA" } as const)[name as "Ed25519"]
  }
  if (key.kty === "RSA") return key.alg === "PS256" ? "PS256" : "RS256"
  if (key.kty === "EC") return key.crv === "P-256" ? "ES256" : undefined
  return key.kty === "OKP" && key.crv === "Ed25519" ? "EdDSA" : undefined
}

const base64url = (bytes: Uint8Array) => {
  let binary = ""
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
}
const jsonPart = (value: unknown) => base64url(new TextEncoder().encode(JSON.stringify(value)))

const signAssertion = (credentials: PrivateKeyCredentials, audience: string) =>
  Effect.tryPromise({
    try: async () => {
      const alg = credentials.alg ?? algorithmOf(credentials.privateKey)
      if (alg === undefined) throw new Error("the key is not an RSA, EC P-256 or Ed25519 private key")
      const params = webCrypto[alg]
      let key: CryptoKey
      if ("algorithm" in credentials.privateKey) key = credentials.privateKey
      else {
        const { alg: _alg, key_ops: _ops, use: _use, ext: _ext, ...jwk } = credentials.privateKey
        key = await crypto.subtle.importKey("jwk", jwk, params.key, false, ["sign"])
      }
      const now = Math.floor(Date.now() / 1000)
      const header = { alg, typ: "JWT", ...(credentials.kid === undefined ? {} : { kid: credentials.kid }) }
      const claims = { iss: credentials.clientId, sub: credentials.clientId, aud: audience, iat: now, exp: now + 60, jti: crypto.randomUUID() }
      const input = `${jsonPart(header)}.${jsonPart(claims)}`
      const signature = await crypto.subtle.sign(params.sign, key, new TextEncoder().encode(input))
      return `${input}.${base64url(new Uint8Array(signature))}`
    },
    catch: (cause) => new ClientAssertionError({ message: `cannot sign a client assertion: ${cause instanceof Error ? cause.message : String(cause)}` })
  })

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
    const credentials = options.clientCredentials
    const keyCredentials = credentials !== undefined && "privateKey" in credentials ? credentials : undefined
    // private_key_jwt: a fresh assertion in the form for every request; client_secret_basic: Basic (withBasic).
    const payloadOf = (payload: RequestTokenInput["payload"]) =>
      keyCredentials === undefined ? Effect.succeed(payload) : Effect.map(
        signAssertion(keyCredentials, keyCredentials.audience ?? options.baseUrl.replace(/\/+$/, "")),
        (assertion): RequestTokenInput["payload"] => ({
          ...payload,
          client_id: keyCredentials.clientId,
          client_assertion_type: JwtBearerAssertionType,
          client_assertion: assertion
        })
      )
    const requestToken: ApiClient["requestToken"] = (request) =>
      Effect.flatMap(
        Effect.flatMap(payloadOf(request.payload), (payload) => tokenEndpoint({ payload, responseMode: "response-only" })),
        (response) =>
          decodeTokenResponse(response).pipe(
            Effect.catchIf(
              isOAuthErrorBody,
              (body) => Effect.fail(new OAuthError({ ...body, ...retryAfterOf(response) }))
            )
          )
      ) as ReturnType<ApiClient["requestToken"]>
    const priceEvents: ApiClient["priceEvents"] = (query) =>
      Effect.map(client.streamPrices({ query }), (events) => Stream.toAsyncIterable(events as Stream.Stream<typeof PriceStreamEvent.Type, unknown>))
    return { ...client, requestToken, priceEvents }
  })
