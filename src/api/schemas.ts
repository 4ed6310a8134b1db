/**
 * Request and response bodies of the specification (section 2) and of CONTRACT C4, C6.
 */
import { Schema, SchemaGetter } from "effect"

export const Scopes = ["health:read", "rates:read", "subscriptions:write"] as const
export type Scope = (typeof Scopes)[number]

// ---- health --------------------------------------------------------------------------------------

export const HealthResponse = Schema.Struct({
  status: Schema.Literal("healthy"),
  timestamp: Schema.String.annotate({ format: "date-time", description: "ISO 8601, UTC" }),
  uptime: Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)).annotate({
    description: "Seconds since this instance started (fractional)"
  }),
  environment: Schema.String
}).annotate({
  identifier: "HealthResponse",
  examples: [{ status: "healthy", timestamp: "2025-01-15T12:00:00.000Z", uptime: 3600.25, environment: "production" }]
})
export type HealthResponse = typeof HealthResponse.Type

// ---- exchange rates ------------------------------------------------------------------------------

export const MaxSymbols = 50
/** Longer than any ticker symbol in use; a longer one is refused (400) rather than looked up. */
export const MaxSymbolLength = 32
export const SymbolPattern = /^[A-Za-z0-9._-]+$/u

export const CryptoSymbol = Schema.String.check(
  Schema.isMinLength(1),
  Schema.isMaxLength(MaxSymbolLength),
  Schema.isPattern(SymbolPattern)
)

const MaxCurrencyLength = 10

const CurrencyCode = Schema.String.check(
  Schema.isMaxLength(MaxCurrencyLength),
  Schema.isPattern(new RegExp(`^[A-Za-z]{2,${MaxCurrencyLength}}$`, "u"))
).annotate({
  description: "Fiat or quote currency code, case-insensitive (default usd)"
})

const DaysCount = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 365 })).annotate({
  description: "Number of daily points (default 30)"
})

/** 1 to 50 symbols. */
const Cryptos = Schema.Array(CryptoSymbol).check(Schema.isMinLength(1), Schema.isMaxLength(MaxSymbols))

/** Spec: `cryptos` required, at least one item; additional properties allowed (and ignored). */
export const ExchangeRatesRequest = Schema.StructWithRest(
  Schema.Struct({
    cryptos: Cryptos,
    currency: Schema.optionalKey(CurrencyCode),
    days: Schema.optionalKey(DaysCount)
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({ identifier: "ExchangeRatesRequest", examples: [{ cryptos: ["BTC", "ETH"], currency: "usd", days: 7 }] })
export type ExchangeRatesRequest = typeof ExchangeRatesRequest.Type

/**
 * The same query in a URL (C4 "Cacheable reads"): `cryptos` comma-separated, the other members as the
 * POST's; other parameters ignored, as the POST ignores other members. Decoded, it is the POST's body.
 */
export const ExchangeRatesQuery = {
  cryptos: Schema.String.annotate({
    description: "Comma-separated symbols, 1 to 50, each `^[A-Za-z0-9._-]+$` and at most 32 characters (case-insensitive)",
    examples: ["BTC,ETH"]
  }).pipe(Schema.decodeTo(Cryptos, {
    decode: SchemaGetter.split(),
    encode: SchemaGetter.transform((symbols: ReadonlyArray<string>) => symbols.join(","))
  })),
  currency: Schema.optionalKey(CurrencyCode),
  days: Schema.optionalKey(DaysCount)
}


/** The price stream's query (C10): `cryptos` and `currency` as the cacheable read's; other parameters ignored. */
export const PricesStreamQuery = {
  cryptos: ExchangeRatesQuery.cryptos,
  currency: Schema.optionalKey(CurrencyCode)
}

const NullableNumber = Schema.NullOr(Schema.Finite)

/** A source of prices or series: CoinGecko, or Coinbase Exchange (its live feed, its REST market data). */
const SourceName = Schema.Literals(["coingecko", "coinbase"])

export const RateEntry = Schema.Struct({
  symbol: Schema.String,
  id: Schema.String,
  name: Schema.String,
  price: Schema.Finite,
  change: Schema.Struct({ "24h": NullableNumber, "7d": NullableNumber, "30d": NullableNumber }),
  series: Schema.Array(Schema.Tuple([Schema.Int, Schema.Finite])).annotate({
    description: "Daily points [epoch ms at 00:00 UTC, price], oldest first"
  }),
  source: Schema.Literals(["coingecko", "coinbase", "mixed"]).annotate({
    description: "Where this rate comes from: the one source of its price and its series, or mixed when they differ"
  }),
  sources: Schema.Struct({ price: SourceName, series: SourceName }).annotate({
    description: "Where its price came from (Coinbase Exchange's live quotes for the pairs it lists, else CoinGecko) and where its series came from (CONTRACT C4, Live quotes)"
  }),
  asOf: Schema.String.annotate({ format: "date-time", description: "When its price was observed: a live quote's last trade or heartbeat, else the source's refresh" })
})

/**
 * The spec calls the 200 body a free-form object; CONTRACT C4 fixes its members. The OpenAPI
 * document keeps additional properties allowed (see openapi.ts) so clients must tolerate new ones.
 */
export const ExchangeRatesResponse = Schema.Struct({
  currency: Schema.String,
  days: Schema.Int,
  interval: Schema.Literal("daily"),
  asOf: Schema.String.annotate({ format: "date-time", description: "When the answer's oldest price was observed" }),
  source: Schema.Literals(["coingecko", "coinbase", "mixed"]).annotate({
    description: "The one source of every price and series of the answer, or mixed when it used both"
  }),
  stale: Schema.Boolean,
  rates: Schema.Array(RateEntry),
  unknown: Schema.Array(Schema.String),
  attribution: Schema.String.annotate({ description: "Names every source used" })
}).annotate({
  identifier: "ExchangeRatesResponse",
  examples: [{
    currency: "USD",
    days: 7,
    interval: "daily",
    asOf: "2025-01-15T11:58:00Z",
    source: "mixed",
    stale: false,
    rates: [{
      symbol: "BTC",
      id: "bitcoin",
      name: "Bitcoin",
      price: 99850.12,
      change: { "24h": 1.42, "7d": -2.3, "30d": 5.87 },
      series: [
        [1736380800000, 95043.11],
        [1736467200000, 92552.49],
        [1736553600000, 94701.46],
        [1736640000000, 94566.59],
        [1736726400000, 94488.44],
        [1736812800000, 94516.53],
        [1736899200000, 96534.05]
      ],
      source: "mixed",
      sources: { price: "coinbase", series: "coingecko" },
      asOf: "2025-01-15T11:59:58Z"
    }, {
      symbol: "PEPE",
      id: "pepe",
      name: "Pepe",
      price: 0.00001871,
      change: { "24h": -3.1, "7d": 8.4, "30d": 21.7 },
      series: [
        [1736380800000, 0.00001702],
        [1736467200000, 0.00001688],
        [1736553600000, 0.00001745],
        [1736640000000, 0.00001711],
        [1736726400000, 0.00001790],
        [1736812800000, 0.00001825],
        [1736899200000, 0.00001846]
      ],
      source: "coingecko",
      sources: { price: "coingecko", series: "coingecko" },
      asOf: "2025-01-15T11:58:00Z"
    }],
    unknown: [],
    attribution: "Data provided by CoinGecko; Data provided by Coinbase Exchange"
  }, {
    currency: "EUR",
    days: 2,
    interval: "daily",
    asOf: "2025-01-15T11:55:00Z",
    source: "mixed",
    stale: false,
    rates: [{
      symbol: "BTC",
      id: "bitcoin",
      name: "Bitcoin",
      price: 96950.4,
      change: { "24h": 1.38, "7d": -2.1, "30d": 5.9 },
      series: [[1736812800000, 91817.7], [1736899200000, 93778.3]],
      source: "coingecko",
      sources: { price: "coingecko", series: "coingecko" },
      asOf: "2025-01-15T11:55:00Z"
    }, {
      symbol: "ETH",
      id: "ethereum",
      name: "Ethereum",
      price: 3230.55,
      change: { "24h": 0.91, "7d": -4.02, "30d": -1.7 },
      series: [[1736812800000, 3102.18], [1736899200000, 3175.02]],
      source: "coinbase",
      sources: { price: "coinbase", series: "coinbase" },
      asOf: "2025-01-15T12:00:00Z"
    }],
    unknown: [],
    attribution: "Data provided by CoinGecko; Data provided by Coinbase Exchange"
  }]
})

// ---- subscribe -----------------------------------------------------------------------------------

export const Locale = Schema.Literals(["es", "en", "fr", "it", "pt"])

/** Spec: additional properties are not allowed (the group sets onExcessProperty: "error"). */
export const SubscribeRequest = Schema.Struct({
  // Annotated before the check, so the document states maxLength beside the format (not under allOf).
  email: Schema.String.annotate({
    format: "email",
    description: "A deliverable address: no display name, no IP-literal domain, a TLD required"
  }).check(Schema.isMaxLength(254)),
  locale: Locale
}).annotate({ identifier: "SubscribeRequest", examples: [{ email: "ada.lovelace@example.com", locale: "en" }] })
export type SubscribeRequest = typeof SubscribeRequest.Type

export const SuccessResponse = Schema.Struct({ success: Schema.Literal(true) }).annotate({
  identifier: "SuccessResponse",
  examples: [{ success: true }]
})

// ---- OAuth ---------------------------------------------------------------------------------------

/** RFC 7523 §2.2: the `client_assertion_type` of a client authenticating with a signed JWT (`private_key_jwt`). */
export const JwtBearerAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/**
 * The JWS algorithms a client assertion may be signed with (CONTRACT C6): RSA, RSA-PSS, P-256 and Ed25519
 * signatures. `Ed25519` is RFC 9864's fully specified name of EdDSA over Ed25519, which oauth4webapi signs with.
 */
export const ClientAssertionAlgorithms = ["RS256", "PS256", "ES256", "EdDSA", "Ed25519"] as const

/** RFC 7591 names of the client authentication methods; each client is registered for one. */
export const TokenEndpointAuthMethods = ["client_secret_basic", "private_key_jwt"] as const

/** RFC 6749 §4.4.2; parsed by the token endpoint itself (duplicates refused, unknown ignored). */
export const TokenRequest = Schema.Struct({
  grant_type: Schema.Literal("client_credentials"),
  scope: Schema.optionalKey(Schema.String.annotate({ description: "Space-delimited subset of the client's scopes" })),
  client_id: Schema.optionalKey(Schema.String.annotate({
    description: "The client's id: optional; when sent, it must name the client that authenticates"
  })),
  client_assertion_type: Schema.optionalKey(Schema.Literal(JwtBearerAssertionType).annotate({
    description: "`private_key_jwt` clients only (RFC 7523 section 2.2), with `client_assertion`, instead of HTTP Basic"
  })),
  client_assertion: Schema.optionalKey(Schema.String.annotate({
    description: "`private_key_jwt` clients only: a JWT signed with the client's private key (RS256, PS256, ES256 or EdDSA) " +
      "whose `iss` and `sub` are the client id, `aud` the issuer or the token endpoint URL, `exp` at most 5 minutes ahead, " +
      "with `iat` and a `jti` never used before"
  }))
}).annotate({
  identifier: "TokenRequest",
  // Every example is posted by test/unit/http/openapi-examples.test.ts and must get a token: a client assertion cannot be one.
  examples: [{ grant_type: "client_credentials", scope: "rates:read" }]
})

export const TokenResponse = Schema.Struct({
  access_token: Schema.String,
  token_type: Schema.Literal("Bearer"),
  expires_in: Schema.Int,
  scope: Schema.String
}).annotate({
  identifier: "TokenResponse",
  examples: [{
    access_token: "eyJhbGciOiJFUzI1NiIsImtpZCI6IjdxZjNrIiwidHlwIjoiYXQrand0In0.eyJzdWIiOiJwYXJ0bmVyLWFuYWx5dGljcyJ9.c2lnbmF0dXJl",
    token_type: "Bearer",
    expires_in: 900,
    scope: "rates:read"
  }]
})

export const OAuthErrorCode = Schema.Literals([
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "unauthorized_client",
  "unsupported_grant_type",
  "invalid_scope"
])

/** RFC 6749 §5.2 members and the problem members of C7, in one application/json object (C6). */
export const OAuthErrorBody = Schema.Struct({
  error: OAuthErrorCode,
  error_description: Schema.String,
  type: Schema.String,
  title: Schema.String,
  status: Schema.Int,
  detail: Schema.String,
  code: Schema.String,
  resolution: Schema.String,
  /** `urn:uuid:<X-Request-Id>`, as on every other problem (C7). */
  instance: Schema.optionalKey(Schema.String.annotate({ format: "uri-reference" }))
}).annotate({
  identifier: "OAuthError",
  examples: [{
    error: "invalid_client",
    error_description: "The client id and secret were not accepted.",
    type: "https://api.example.com/problems/invalid_client",
    title: "Client authentication failed",
    status: 401,
    detail: "The client id and secret were not accepted.",
    code: "invalid_client",
    resolution: "Check the credentials the operator issued (form-urlencode id and secret before base64), or ask for new ones.",
    instance: "urn:uuid:3b241101-e2bb-4255-8caf-4136c566a962"
  }]
})

export const AuthorizationServerMetadata = Schema.StructWithRest(
  Schema.Struct({
    issuer: Schema.String,
    token_endpoint: Schema.String,
    jwks_uri: Schema.String,
    scopes_supported: Schema.Array(Schema.String),
    grant_types_supported: Schema.Array(Schema.String),
    token_endpoint_auth_methods_supported: Schema.Array(Schema.String),
    token_endpoint_auth_signing_alg_values_supported: Schema.Array(Schema.String),
    response_types_supported: Schema.Array(Schema.String),
    service_documentation: Schema.String
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({
  identifier: "AuthorizationServerMetadata",
  examples: [{
    issuer: "https://api.example.com",
    token_endpoint: "https://api.example.com/oauth/token",
    jwks_uri: "https://api.example.com/.well-known/jwks.json",
    scopes_supported: ["health:read", "rates:read", "subscriptions:write"],
    grant_types_supported: ["client_credentials"],
    token_endpoint_auth_methods_supported: ["client_secret_basic", "private_key_jwt"],
    token_endpoint_auth_signing_alg_values_supported: ["RS256", "PS256", "ES256", "EdDSA", "Ed25519"],
    response_types_supported: [],
    service_documentation: "https://api.example.com/docs"
  }]
})

export const JsonWebKeySet = Schema.Struct({
  keys: Schema.Array(Schema.Record(Schema.String, Schema.Unknown))
}).annotate({
  identifier: "JsonWebKeySet",
  examples: [{
    keys: [{
      kty: "EC",
      crv: "P-256",
      x: "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
      y: "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
      kid: "7qf3k",
      use: "sig",
      alg: "ES256"
    }]
  }]
})

// ---- live prices (C10) ---------------------------------------------------------------------------

const LivePriceExample = { symbol: "BTC", price: 99850.12, change24h: 1.42, at: "2025-01-15T12:00:00.123Z", source: "coinbase" } as const

/** One held price as the stream sends it: `at` when it was observed (a feed tick's time for Coinbase). */
export const LivePrice = Schema.Struct({
  symbol: Schema.String,
  price: Schema.Finite,
  change24h: NullableNumber.annotate({ description: "Change over 24 hours in %, when the source gives it" }),
  at: Schema.String.annotate({ format: "date-time", description: "When the price was observed" }),
  source: SourceName
}).annotate({ identifier: "LivePrice", examples: [LivePriceExample] })
export type LivePrice = typeof LivePrice.Type

/** The first event of a stream, and of every reconnection: what is held now; a symbol not yet held comes with its first price event. */
export const PriceSnapshot = Schema.Struct({
  currency: Schema.String,
  prices: Schema.Array(LivePrice),
  unknown: Schema.Array(Schema.String)
}).annotate({ identifier: "PriceSnapshot", examples: [{ currency: "USD", prices: [LivePriceExample], unknown: ["FOO"] }] })
export type PriceSnapshot = typeof PriceSnapshot.Type

const eventId = Schema.optionalKey(Schema.String).annotate({ description: "Increasing within a stream" })

/** The events of GET /api/v1/prices/stream (C10), as Server-Sent Events: `snapshot`, then `price` whenever a held price changes. */
export const PriceStreamEvent = Schema.Union([
  Schema.Struct({ id: eventId, event: Schema.Literal("snapshot"), data: Schema.fromJsonString(PriceSnapshot) }),
  Schema.Struct({ id: eventId, event: Schema.Literal("price"), data: Schema.fromJsonString(LivePrice) })
]).annotate({ identifier: "PriceStreamEvent", examples: [{ id: "42", event: "price", data: LivePriceExample }] })
export type PriceStreamEvent = typeof PriceStreamEvent.Type
