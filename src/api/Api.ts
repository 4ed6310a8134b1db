/**
 * The contract: one HttpApi from which the server, the OpenAPI document, the typed client and the
 * tests derive. It imports nothing from the server, so integrators can depend on it alone.
 */
import { Context, Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, OpenApi } from "effect/http-api"
import { transformOpenApi, withCachingFields, withRateLimitFields } from "./openapi.ts"
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
  ExchangeRatesQuery,
  ExchangeRatesRequest,
  ExchangeRatesResponse,
  HealthResponse,
  JsonWebKeySet,
  OAuthErrorBody,
  PriceStreamEvent,
  PricesStreamQuery,
  type Scope,
  SubscribeRequest,
  SuccessResponse,
  TokenRequest,
  TokenResponse
} from "./schemas.ts"

/** The scope a Bearer token needs for an operation (CONTRACT C6). Read by the Bearer middleware. */
export class RequiredScope extends Context.Service<RequiredScope, Scope>()("app/RequiredScope") {}

export type RateLimitPolicyName = "rates" | "subscribe"

/** Which rate-limit policy of CONTRACT C8 an operation counts against (the edge counts). */
export class RateLimitPolicy extends Context.Service<RateLimitPolicy, RateLimitPolicyName>()("app/RateLimitPolicy") {}

/** A public operation (spec §1): browsers may call it (CORS, C2); never the token endpoint. */
export class PublicOperation extends Context.Service<PublicOperation, true>()("app/PublicOperation") {}

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
 * token is 401 and a token without the operation's `RequiredScope` is 403.
 */
export class OptionalBearer extends HttpApiMiddleware.Service<OptionalBearer>()("app/OptionalBearer", {
  error: [InvalidToken, InsufficientScope]
}) {}

/** A JSON body that does not parse or decode: 400 (the edge's, or the HttpApi's rendered by this middleware). */
export class BodyProblems extends HttpApiMiddleware.Service<BodyProblems>()("app/BodyProblems", {
  error: [MalformedJson, ValidationFailed]
}) {}

/**
 * What the edge (src/http/edge.ts, and apiErrors.ts behind it) answers on an operation before or
 * instead of its handler, by kind of operation: listed with the operation's own errors, so that the
 * OpenAPI document and the typed client know them.
 */
const EdgeProblems = {
  /** Another method on its path: 405 with Allow. Nothing else for health (spec §7: 200 or 405). */
  probe: [MethodNotAllowed],
  /** A defect is answered 500 (C7); the token endpoint's 405, 413 and 429 are its own, in the OAuth form (C6). */
  token: [InternalError],
  /** A document of the authorization server: 405 or 500. */
  document: [MethodNotAllowed, InternalError],
  /**
   * A rate-limited operation: 413 and 415, decided from the request's headers or while reading a
   * body; 429 with Retry-After and the RateLimit fields (C8), counted before it runs.
   */
  limited: [MethodNotAllowed, InternalError, PayloadTooLarge, UnsupportedMediaType, RateLimited]
} as const

/**
 * A public operation's policy, stated once: the edge reads the annotations (CORS, limit), the Bearer
 * middleware the scope, and the OpenAPI document gets the matching security (anonymous, or a token
 * with the scope: a token only raises the rate limit).
 */
const publicOperation = (policy: {
  readonly scope?: Scope
  readonly limit?: RateLimitPolicyName
  /** Its 200 carries ETag and Cache-Control, and a matching If-None-Match gets 304 (C4 "Cacheable reads"). */
  readonly cacheable?: true
}) =>
<E extends HttpApiEndpoint.Constraint>(endpoint: E): E => {
  // `annotate` returns the same endpoint type; the generic bound cannot say so.
  let annotated = (endpoint as unknown as HttpApiEndpoint.Top).annotate(PublicOperation, true).annotate(OpenApi.Transform, (op: Record<string, any>) => {
    const secured = { ...op, security: policy.scope === undefined ? [{}] : [{}, { oauth2: [policy.scope] }] }
    const cached = policy.cacheable === true ? withCachingFields(secured) : secured
    // The edge counts a limited operation before answering, so its answers carry the RateLimit fields.
    return policy.limit === undefined ? cached : withRateLimitFields(cached)
  })
  if (policy.scope !== undefined) annotated = annotated.annotate(RequiredScope, policy.scope)
  if (policy.limit !== undefined) annotated = annotated.annotate(RateLimitPolicy, policy.limit)
  return annotated as unknown as E
}

/** Health is exactly the specification's (C3): no limit, no token, 200 or 405. */
export class HealthGroup extends HttpApiGroup.make("health", { topLevel: true })
  .add(
    HttpApiEndpoint.get("getHealth", "/api/health", { success: HealthResponse, error: EdgeProblems.probe })
      .annotate(OpenApi.Summary, "Report service health")
      .annotate(OpenApi.Description, "Whether this instance serves, since when and in which environment. Never rate-limited, " +
        "tokens ignored: a load balancer's probe gets 200 (or 405 for another method), nothing else.")
      .pipe(publicOperation({}))
  )
  .annotate(OpenApi.Title, "Health")
  .annotate(OpenApi.Description, "Liveness of the public API, as load balancers and status pages read it.")
{}

export class RatesGroup extends HttpApiGroup.make("rates", { topLevel: true })
  .add(
    HttpApiEndpoint.post("getHistoricalExchangeRates", "/api/v1/exchange-rates", {
      payload: ExchangeRatesRequest,
      success: ExchangeRatesResponse,
      error: [NoValidSymbols, UpstreamError, ServiceUnavailable, ...EdgeProblems.limited]
    })
      .annotate(OpenApi.Summary, "Historical exchange rates for cryptocurrency symbols")
      .annotate(OpenApi.Description, "Daily prices of up to 50 symbols over 1 to 365 days, in a fiat currency. Unknown symbols are " +
        "listed in `unknown`; none known is a 400. Anonymous callers are limited per address, a token with " +
        "`rates:read` per client (ten times more).")
      .pipe(publicOperation({ scope: "rates:read", limit: "rates" })),
    HttpApiEndpoint.get("getExchangeRates", "/api/v1/rates", {
      query: ExchangeRatesQuery,
      success: ExchangeRatesResponse,
      error: [NoValidSymbols, UpstreamError, ServiceUnavailable, ...EdgeProblems.limited]
    })
      .annotate(OpenApi.Summary, "The same exchange rates as a cacheable read")
      .annotate(OpenApi.Description, "Answers exactly what POST /api/v1/exchange-rates answers for the same query, with " +
        "`cryptos` comma-separated. Browsers and shared caches (a CDN) may keep a 200 as its Cache-Control says: `max-age` " +
        "no longer than its prices hold, then `stale-while-revalidate` and `stale-if-error`; its ETag gets a 304. Every " +
        "spelling of a query (case, duplicates, defaults written or not, parameter order) gets the same body and ETag. " +
        "Problems are never cached.")
      .pipe(publicOperation({ scope: "rates:read", limit: "rates", cacheable: true }))
  )
  // The last one added runs first: OptionalBearer, then body (or query) decoding.
  .middleware(BodyProblems)
  .middleware(OptionalBearer)
  .annotate(OpenApi.Title, "Exchange rates")
  .annotate(OpenApi.Description, "Historical and latest prices of cryptocurrencies (CoinGecko, Coinbase as a second source).")
{}

export class PricesGroup extends HttpApiGroup.make("prices", { topLevel: true })
  .add(
    HttpApiEndpoint.get("streamPrices", "/api/v1/prices/stream", {
      query: PricesStreamQuery,
      success: HttpApiSchema.StreamSse({ events: PriceStreamEvent, contentType: "text/event-stream; charset=utf-8" }),
      error: [NoValidSymbols, UpstreamError, ServiceUnavailable, ...EdgeProblems.limited]
    })
      .annotate(OpenApi.Summary, "Live prices pushed as Server-Sent Events")
      .annotate(OpenApi.Description, "A `text/event-stream` (C10): first `retry:`, then `event: snapshot` with the prices held now, then " +
        "`event: price` whenever a held price changes (Coinbase's feed ticks for the pairs it lists, CoinGecko's refreshes for the " +
        "rest), at most 4 a second per symbol, the latest winning; every event has an `id`, increasing within a stream; a comment " +
        "line after 15 s without an event. A reconnection (`Last-Event-ID`) gets a new snapshot. Refusals come before any stream: " +
        "400, 429 beyond the open streams allowed per address, 503 beyond those of the process; opening counts once against the " +
        "exchange-rates limit. HEAD answers the head only.")
      .pipe(publicOperation({ scope: "rates:read", limit: "rates" }))
  )
  .middleware(BodyProblems)
  .middleware(OptionalBearer)
  .annotate(OpenApi.Title, "Live prices")
  .annotate(OpenApi.Description, "Prices pushed as they change, from the service's one Coinbase feed and CoinGecko's refreshes.")
{}

export class NewsletterGroup extends HttpApiGroup.make("newsletter", { topLevel: true })
  .add(
    HttpApiEndpoint.post("subscribeToUpdates", "/api/subscribe", {
      payload: SubscribeRequest,
      success: SuccessResponse,
      error: [InvalidEmail, UpstreamError, ...EdgeProblems.limited]
    })
      .annotate(OpenApi.Summary, "Subscribe an e-mail address to the newsletter")
      .annotate(OpenApi.Description, "Forwards the address and locale to the newsletter provider (double opt-in where it offers it). " +
        "New, pending or already subscribed addresses all get 200, so the answer reveals no subscriber.")
      .pipe(publicOperation({ scope: "subscriptions:write", limit: "subscribe" }))
  )
  .middleware(BodyProblems)
  .middleware(OptionalBearer)
  // The spec forbids additional properties on this body: refuse them instead of stripping them.
  // Options replace the API's (HttpApi.ts), so every failure is asked for again.
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" })
  .annotate(OpenApi.Title, "Newsletter")
  .annotate(OpenApi.Description, "Sign-up to the company's newsletter in one of five languages.")
{}

const oauthError = (status: number) => OAuthErrorBody.pipe(HttpApiSchema.status(status))

export class OAuthGroup extends HttpApiGroup.make("oauth", { topLevel: true })
  .add(
    // C6: every error of this endpoint, the edge's 405 and 413 included, is in the OAuth JSON form.
    HttpApiEndpoint.post("requestToken", "/oauth/token", {
      payload: TokenRequest.pipe(HttpApiSchema.asFormUrlEncoded()),
      success: TokenResponse,
      error: [oauthError(400), oauthError(401), oauthError(405), oauthError(413), oauthError(429), ...EdgeProblems.token]
    }).annotate(OpenApi.Summary, "Client-credentials grant (RFC 6749 §4.4): HTTP Basic or a signed client assertion")
      .annotate(OpenApi.Description, "Issues a short-lived RFC 9068 access token for approved integrations. Each client " +
        "authenticates one way, the one it was registered for: `client_secret_basic` (id and secret in HTTP Basic) or " +
        "`private_key_jwt` (RFC 7523: `client_assertion_type` and `client_assertion` in the form, a JWT signed with the " +
        "client's private key; the service holds only its public keys). Any failed authentication is the same 401 " +
        "`invalid_client`; every error is `application/json` with the RFC 6749 `error` member. No CORS: credentials do " +
        "not belong in a browser."),
    HttpApiEndpoint.get("getAuthorizationServerMetadata", "/.well-known/oauth-authorization-server", {
      success: AuthorizationServerMetadata,
      error: EdgeProblems.document
    }).annotate(OpenApi.Summary, "RFC 8414 authorization server metadata")
      .annotate(OpenApi.Description, "The issuer, token endpoint, key set and scopes, for OAuth libraries that discover them."),
    HttpApiEndpoint.get("getJwks", "/.well-known/jwks.json", { success: JsonWebKeySet, error: EdgeProblems.document })
      .annotate(OpenApi.Summary, "Public keys that sign access tokens")
      .annotate(OpenApi.Description, "Every published ES256 key (JWK Set), the current one and those still verifying live tokens.")
  )
  .annotate(OpenApi.Title, "OAuth 2.0")
  .annotate(OpenApi.Description, "Client credentials for approved private integrations: a token only raises the rate limit.")
{}

/** The widget's script (C10): a JavaScript module, the same bytes for everyone, so no limit and no token. */
export const WidgetScript = Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/javascript" })).annotate({
  description: "The ES module defining the <crypto-prices> custom element (UTF-8)"
})

export class WidgetGroup extends HttpApiGroup.make("widget", { topLevel: true })
  .add(
    HttpApiEndpoint.get("getWidget", "/widget.js", { success: WidgetScript, error: EdgeProblems.document })
      .annotate(OpenApi.Summary, "The embeddable price widget")
      .annotate(OpenApi.Description, "A JavaScript module defining `<crypto-prices symbols=\"BTC,ETH\" currency=\"usd\" days=\"30\">`: " +
        "each symbol's name, price, 24 h change and a sparkline of the days, then live prices. Load it as a module script " +
        "(`type=\"module\"`) from a page of any origin CORS_ORIGINS allows (it is served with " +
        "`Cross-Origin-Resource-Policy: cross-origin`); it reads the API's address from its own URL. Revalidate with its ETag.")
      .pipe(publicOperation({ cacheable: true }))
  )
  .annotate(OpenApi.Title, "Widget")
  .annotate(OpenApi.Description, "Prices for another site's pages: a custom element served by the API.")
{}

export class Api extends HttpApi.make("crypto-landing-api")
  .add(HealthGroup, RatesGroup, PricesGroup, NewsletterGroup, OAuthGroup, WidgetGroup)
  // A validation problem lists every failed member, not the first (C7), of a body or a query.
  .annotate(HttpApi.PayloadParseOptions, { errors: "all" })
  .annotate(HttpApi.QueryParseOptions, { errors: "all" })
  .annotateMerge(OpenApi.annotations({
    title: "Crypto landing API",
    version: "1.0.0",
    description: "Service health, historical exchange rates for crypto symbols and newsletter sign-up. " +
      "Errors are RFC 9457 problem details; see /problems/{code}.",
    // No open-source licence is granted: the reference states it rather than leaving it unsaid.
    license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
    transform: transformOpenApi
  }))
{}

/** Every operation's `operationId`, as the contract names it (the OpenAPI document uses the same names). */
export type OperationId = typeof Api extends HttpApi.HttpApi<infer _Id, infer Groups>
  ? HttpApiEndpoint.Identifier<HttpApiGroup.Endpoints<Groups>>
  : never
