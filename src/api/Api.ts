/**
 * The contract: one HttpApi from which the server, the OpenAPI document, the typed client and the
 * tests derive. It imports nothing from the server, so integrators can depend on it alone.
 */
import { Context } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, OpenApi } from "effect/http-api"
import { transformOpenApi } from "./openapi.ts"
import {
  InsufficientScope,
  InternalError,
  InvalidToken,
  MalformedJson,
  MethodNotAllowed,
  NoValidSymbols,
  PayloadTooLarge,
  RateLimited,
  ServiceUnavailable,
  UnsupportedMediaType,
  UpstreamError,
  ValidationFailed,
  InvalidEmail
} from "./problems.ts"
import {
  AuthorizationServerMetadata,
  ExchangeRatesRequest,
  ExchangeRatesResponse,
  HealthResponse,
  JsonWebKeySet,
  OAuthErrorBody,
  type Scope,
  SubscribeRequest,
  SuccessResponse,
  TokenRequest,
  TokenResponse
} from "./schemas.ts"

/** The scope a Bearer token needs for an operation (CONTRACT C6). Read by the Bearer middleware. */
export class RequiredScope extends Context.Service<RequiredScope, Scope>()("app/RequiredScope") {}

export interface Caller {
  readonly clientId: string
  readonly scopes: ReadonlyArray<string>
}

/** The caller behind a valid Bearer token; `undefined` for anonymous calls. */
export const CurrentClient = Context.Reference<Caller | undefined>("app/CurrentClient", {
  defaultValue: () => undefined
})

/**
 * Optional Bearer authentication (spec §5, CONTRACT C6): no Authorization header is anonymous; a bad
 * token is 401 and a token without the operation's `RequiredScope` is 403. The OpenAPI security of
 * the operations (anonymous or oauth2 with the scope) is written in openapi.ts.
 */
export class OptionalBearer extends HttpApiMiddleware.Service<OptionalBearer>()("app/OptionalBearer", {
  error: [InvalidToken, InsufficientScope]
}) {}

/** Problems any operation can answer with, whatever its input: 405, 500. */
export class CommonProblems extends HttpApiMiddleware.Service<CommonProblems>()("app/CommonProblems", {
  error: [MethodNotAllowed, InternalError]
}) {}

export type RateLimitPolicyName = "health" | "rates" | "subscribe"

/** Which rate-limit policy of CONTRACT C8 an operation counts against. */
export class RateLimitPolicy extends Context.Service<RateLimitPolicy, RateLimitPolicyName>()("app/RateLimitPolicy") {}

/**
 * 429 with Retry-After and the IETF RateLimit fields (C8). Placed inside OptionalBearer, so that a
 * valid token moves the caller to the per-client tier.
 */
export class RateLimit extends HttpApiMiddleware.Service<RateLimit>()("app/RateLimit", {
  error: RateLimited
}) {}

/** Problems of operations that read a JSON body: 400 (malformed, invalid), 413, 415. */
export class BodyProblems extends HttpApiMiddleware.Service<BodyProblems>()("app/BodyProblems", {
  error: [MalformedJson, ValidationFailed, PayloadTooLarge, UnsupportedMediaType]
}) {}

export class HealthGroup extends HttpApiGroup.make("health", { topLevel: true })
  .add(
    HttpApiEndpoint.get("getHealth", "/api/health", { success: HealthResponse })
      .annotate(OpenApi.Summary, "Report service health")
      .annotate(RequiredScope, "health:read")
      .annotate(RateLimitPolicy, "health")
  )
  .middleware(RateLimit)
  .middleware(OptionalBearer)
  .middleware(CommonProblems)
  .annotate(OpenApi.Title, "Health")
{}

export class RatesGroup extends HttpApiGroup.make("rates", { topLevel: true })
  .add(
    HttpApiEndpoint.post("getHistoricalExchangeRates", "/api/v1/exchange-rates", {
      payload: ExchangeRatesRequest,
      success: ExchangeRatesResponse,
      error: [NoValidSymbols, UpstreamError, ServiceUnavailable]
    })
      .annotate(OpenApi.Summary, "Historical exchange rates for cryptocurrency symbols")
      .annotate(RequiredScope, "rates:read")
      .annotate(RateLimitPolicy, "rates")
  )
  // The last one added runs first: CommonProblems, OptionalBearer, RateLimit, then body decoding.
  .middleware(BodyProblems)
  .middleware(RateLimit)
  .middleware(OptionalBearer)
  .middleware(CommonProblems)
  .annotate(OpenApi.Title, "Exchange rates")
{}

export class NewsletterGroup extends HttpApiGroup.make("newsletter", { topLevel: true })
  .add(
    HttpApiEndpoint.post("subscribeToUpdates", "/api/subscribe", {
      payload: SubscribeRequest,
      success: SuccessResponse,
      error: [InvalidEmail, UpstreamError]
    })
      .annotate(OpenApi.Summary, "Subscribe an e-mail address to the newsletter")
      .annotate(RequiredScope, "subscriptions:write")
      .annotate(RateLimitPolicy, "subscribe")
  )
  .middleware(BodyProblems)
  .middleware(RateLimit)
  .middleware(OptionalBearer)
  .middleware(CommonProblems)
  // The spec forbids additional properties on this body: refuse them instead of stripping them.
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error" })
  .annotate(OpenApi.Title, "Newsletter")
{}

const oauthError = (status: number) => OAuthErrorBody.pipe(HttpApiSchema.status(status))

export class OAuthGroup extends HttpApiGroup.make("oauth", { topLevel: true })
  .add(
    HttpApiEndpoint.post("requestToken", "/oauth/token", {
      payload: TokenRequest.pipe(HttpApiSchema.asFormUrlEncoded()),
      success: TokenResponse,
      error: [oauthError(400), oauthError(401), oauthError(429)]
    }).annotate(OpenApi.Summary, "Client-credentials grant (RFC 6749 §4.4), HTTP Basic client authentication"),
    HttpApiEndpoint.get("getAuthorizationServerMetadata", "/.well-known/oauth-authorization-server", {
      success: AuthorizationServerMetadata
    }).annotate(OpenApi.Summary, "RFC 8414 authorization server metadata"),
    HttpApiEndpoint.get("getJwks", "/.well-known/jwks.json", { success: JsonWebKeySet })
      .annotate(OpenApi.Summary, "Public keys that sign access tokens")
  )
  .middleware(CommonProblems)
  .annotate(OpenApi.Title, "OAuth 2.0")
{}

export class Api extends HttpApi.make("crypto-landing-api")
  .add(HealthGroup, RatesGroup, NewsletterGroup, OAuthGroup)
  .annotateMerge(OpenApi.annotations({
    title: "Crypto landing API",
    version: "1.0.0",
    description: "Service health, historical exchange rates for crypto symbols and newsletter sign-up. " +
      "Errors are RFC 9457 problem details; see /problems/{code}.",
    transform: transformOpenApi
  }))
{}

/** Every operation's `operationId`, as the contract names it (the OpenAPI document uses the same names). */
export type OperationId = typeof Api extends HttpApi.HttpApi<infer _Id, infer Groups>
  ? HttpApiEndpoint.Identifier<HttpApiGroup.Endpoints<Groups>>
  : never
