/**
 * RFC 9068 JWT access tokens: issued by the token endpoint, verified on every Bearer request.
 *
 * Header `{"alg":"ES256","typ":"at+jwt","kid":…}`; claims `iss` (= PUBLIC_BASE_URL, byte for byte the
 * discovery `issuer`), `sub` and `client_id` (the client), `aud` (= PUBLIC_BASE_URL + "/api"), `iat`,
 * `exp` (= iat + TOKEN_TTL_SECONDS), `jti` (128 random bits), `scope` (space-delimited string).
 *
 * Verification uses keys imported once (SigningKeys), never HTTP. A token that this server could not
 * have issued is refused even with a good signature: `iat` more than 60 s ahead, or `exp - iat` longer
 * than TOKEN_TTL_SECONDS (CONTRACT C6). A token of a revoked client is refused
 * even before it expires; a token outlives a secret rotation (rotation is routine hygiene, revocation is
 * the emergency brake).
 */
import { Clock, Context, Effect, Layer } from "effect"
import * as jose from "jose"
import { AppConfig } from "../config/AppConfig.ts"
import { ClientRegistry } from "./ClientRegistry.ts"
import { InvalidToken, type InvalidTokenReason } from "./errors.ts"
import { SIGNING_ALG } from "./keyMaterial.ts"
import { canonicalScopes, formatScopes, parseScopeString, type Scope } from "./scopes.ts"
import { randomToken } from "./secrets.ts"
import { SigningKeys } from "./SigningKeys.ts"

const ACCESS_TOKEN_TYP = "at+jwt"

/** Who is calling with a valid token. */
export interface Principal {
  readonly clientId: string
  readonly scopes: ReadonlyArray<Scope>
}

interface IssuedToken {
  readonly accessToken: string
  readonly tokenType: "Bearer"
  /** Seconds, a JSON number on the wire. */
  readonly expiresIn: number
  /** Space-delimited granted scopes, always echoed in the token response. */
  readonly scope: string
  readonly jti: string
}

export interface TokenServiceShape {
  readonly issue: (client: { readonly clientId: string }, scopes: ReadonlyArray<Scope>) => Effect.Effect<IssuedToken>
  readonly verify: (token: string) => Effect.Effect<Principal, InvalidToken>
  /** `aud` of every token: PUBLIC_BASE_URL + "/api". */
  readonly audience: string
}

/** RFC 9068 §2.2 required claims, plus `scope` which this API always sets. */
export const REQUIRED_CLAIMS = ["iss", "exp", "aud", "sub", "client_id", "iat", "jti", "scope"]

const JWS_COMPACT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/
const MAX_TOKEN_LENGTH = 4096
/** How far ahead of this clock an `iat` may lie (another instance's clock may run ahead). */
const MAX_CLOCK_SKEW_SECONDS = 60

const invalid = (reason: InvalidTokenReason): InvalidToken =>
  new InvalidToken({
    reason,
    detail: reason === "expired"
      ? "The access token has expired."
      : reason === "revoked_client"
      ? "The client this access token was issued to is no longer active."
      : "The access token is malformed, has a bad signature or was not issued by this server for this API."
  })

/** jose's error codes → our reasons; anything unexpected counts as malformed. */
const reasonFromJose = (error: unknown): InvalidTokenReason => {
  if (error instanceof jose.errors.JWTExpired) return "expired"
  if (error instanceof jose.errors.JWSSignatureVerificationFailed) return "bad_signature"
  if (error instanceof jose.errors.JOSEAlgNotAllowed) return "wrong_alg"
  if (error instanceof jose.errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case "iss":
        return "wrong_issuer"
      case "aud":
        return "wrong_audience"
      case "typ":
        return "wrong_typ"
      case "nbf":
      case "iat":
        return error.reason === "missing" ? "bad_claims" : "not_yet_valid"
      default:
        return "bad_claims"
    }
  }
  return "malformed"
}

export class TokenService extends Context.Service<TokenService, TokenServiceShape>()("app/oauth/TokenService") {
  static readonly layer: Layer.Layer<TokenService, never, AppConfig | SigningKeys | ClientRegistry> = Layer.effect(
    TokenService,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const keys = yield* SigningKeys
      const registry = yield* ClientRegistry
      const issuer = config.publicBaseUrl
      const audience = `${config.publicBaseUrl}/api`
      const ttl = config.tokenTtlSeconds

      const issue: TokenServiceShape["issue"] = (client, scopes) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const iat = Math.floor(now / 1000)
          const jti = randomToken(16)
          const scope = formatScopes(scopes)
          const signing = yield* keys.signingKey()
          // A signing failure means broken key material: a defect (500), not a caller error.
          const accessToken = yield* Effect.promise(() =>
            new jose.SignJWT({ client_id: client.clientId, scope })
              .setProtectedHeader({ alg: SIGNING_ALG, typ: ACCESS_TOKEN_TYP, kid: signing.kid })
              .setIssuer(issuer)
              .setSubject(client.clientId)
              .setAudience(audience)
              .setIssuedAt(iat)
              .setExpirationTime(iat + ttl)
              .setJti(jti)
              .sign(signing.privateKey)
          )
          return { accessToken, tokenType: "Bearer" as const, expiresIn: ttl, scope, jti }
        })

      const verify: TokenServiceShape["verify"] = (token) =>
        Effect.gen(function*() {
          if (token.length > MAX_TOKEN_LENGTH || !JWS_COMPACT.test(token)) return yield* Effect.fail(invalid("malformed"))
          let header: jose.ProtectedHeaderParameters
          try {
            header = jose.decodeProtectedHeader(token)
          } catch {
            return yield* Effect.fail(invalid("malformed"))
          }
          // Checked before any key lookup: never let the token choose the algorithm (no `none`, no HS256).
          if (header.alg !== SIGNING_ALG) return yield* Effect.fail(invalid("wrong_alg"))
          if (typeof header.kid !== "string") return yield* Effect.fail(invalid("unknown_kid"))
          const key = yield* keys.verificationKey(header.kid)
          if (key === undefined) return yield* Effect.fail(invalid("unknown_kid"))
          const now = yield* Clock.currentTimeMillis
          const result = yield* Effect.tryPromise({
            try: () =>
              jose.jwtVerify(token, key, {
                issuer,
                audience,
                typ: ACCESS_TOKEN_TYP,
                algorithms: [SIGNING_ALG],
                requiredClaims: REQUIRED_CLAIMS,
                currentDate: new Date(now)
              }),
            catch: (error) => invalid(reasonFromJose(error))
          })
          const { client_id: clientId, sub, scope, jti, iat, exp } = result.payload
          if (typeof clientId !== "string" || clientId !== sub || typeof scope !== "string" || typeof jti !== "string") {
            return yield* Effect.fail(invalid("bad_claims"))
          }
          // C6: what this server could not have issued, even signed with its key (jose checks neither).
          if (iat! > now / 1000 + MAX_CLOCK_SKEW_SECONDS) return yield* Effect.fail(invalid("not_yet_valid"))
          if (exp! - iat! > ttl) return yield* Effect.fail(invalid("bad_claims"))
          const parsed = parseScopeString(scope)
          if (parsed._tag !== "Ok") return yield* Effect.fail(invalid("bad_claims"))
          const client = yield* registry.get(clientId)
          if (client === undefined || client.status !== "active") return yield* Effect.fail(invalid("revoked_client"))
          // The client's current scopes bound what an older token may still do.
          const allowed = new Set(client.scopes)
          return { clientId, scopes: canonicalScopes(parsed.scopes.filter((s) => allowed.has(s))) }
        })

      return { issue, verify, audience }
    })
  )
}
