/**
 * `private_key_jwt` client authentication (RFC 7523 §2.2 and §3, OpenID Connect Core §9, CONTRACT C6):
 * the checks of a client assertion, in order, each failing with its own reason (for the log; the caller
 * gets the same `invalid_client` whatever failed).
 *
 * 1. `client_assertion_type` is the jwt-bearer URN; the assertion is a compact JWS of at most 8 KiB.
 * 2. Its header's `alg` is RS256, PS256, ES256 or EdDSA (Ed25519), checked before any key is looked at:
 *    `none` and HMAC are refused, so a public key can never serve as an HMAC secret. jose then picks
 *    keys by `kid`, key type and curve (a key of another type never verifies), the algorithm allow-list
 *    passed again.
 * 3. `iss` = `sub` = the client id (and = the body's `client_id` when sent); the client exists, is
 *    registered for private_key_jwt, and its keys (held, or from its jwks_uri: RemoteJwks) verify the
 *    signature. An unknown `kid` at a jwks_uri client fetches its keys again (at most once a minute).
 * 4. Claims, with 60 s of clock skew: `aud` the issuer or the token endpoint URL (every value of it:
 *    an assertion also meant for another server is refused), `exp` not passed and at most 5 minutes
 *    ahead, `iat` not in the future, `jti` present, `nbf` (if any) reached.
 * 5. The client is active, and the `jti` was never used (JtiStore, until `exp` + 60 s).
 *
 * An unknown client, a client of the other method and an unknown `kid` cost a signature verification
 * too (with a throw-away key), so that their answers take about as long as a bad signature's.
 */
import { Clock, Context, Effect, Layer } from "effect"
import * as jose from "jose"
import { ClientAssertionAlgorithms, JwtBearerAssertionType } from "../../api/schemas.ts"
import { AppConfig } from "../../config/AppConfig.ts"
import { ClientRegistry } from "../ClientRegistry.ts"
import { keySelector } from "../clientKeys.ts"
import { discoveryDocument } from "../discovery.ts"
import { ClientAuthFailed, type ClientAuthFailure } from "../errors.ts"
import { RemoteJwks } from "../jwksUri/RemoteJwks.ts"
import type { OAuthClient } from "../oauthClient.ts"
import { JtiStore } from "./JtiStore.ts"

const MAX_ASSERTION_LENGTH = 8192
/** Clock skew tolerated on `exp`, `nbf` and `iat` (CONTRACT C6). */
const ASSERTION_SKEW_SECONDS = 60
/** `exp` at most this far ahead (CONTRACT C6), skew added. */
const MAX_ASSERTION_LIFETIME_SECONDS = 300

const JWS_COMPACT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/
const REQUIRED_CLAIMS = ["iss", "sub", "aud", "exp", "iat", "jti"]
const algorithms: ReadonlyArray<string> = ClientAssertionAlgorithms

export interface AssertionInput {
  readonly assertionType: string | undefined
  readonly assertion: string | undefined
  /** The body's `client_id`, when sent. */
  readonly clientId: string | undefined
}

export interface ClientAssertionShape {
  readonly authenticate: (input: AssertionInput) => Effect.Effect<OAuthClient, ClientAuthFailed>
}

/**
 * The client a request claims to be, before anything is verified: the body's `client_id`, else the
 * assertion's `sub` (or `iss`). The failure limiter counts per (address, this client).
 */
export const claimedClient = (input: AssertionInput): string | undefined => {
  if (input.clientId !== undefined) return input.clientId
  if (input.assertion === undefined || input.assertion.length > MAX_ASSERTION_LENGTH) return undefined
  try {
    const { sub, iss } = jose.decodeJwt(input.assertion)
    return typeof sub === "string" ? sub : typeof iss === "string" ? iss : undefined
  } catch {
    return undefined
  }
}

const failed = (reason: ClientAuthFailure) => new ClientAuthFailed({ reason })

/** jose's verdicts → our reasons. */
const reasonFromJose = (error: unknown): ClientAuthFailure => {
  if (error instanceof jose.errors.JWKSNoMatchingKey) return "unknown_kid"
  if (error instanceof jose.errors.JWSSignatureVerificationFailed) return "bad_signature"
  if (error instanceof jose.errors.JWTExpired) return "expired"
  if (error instanceof jose.errors.JOSEAlgNotAllowed) return "assertion_alg"
  if (error instanceof jose.errors.JWTClaimValidationFailed) {
    if (error.reason === "missing") return "missing_claim"
    if (error.claim === "aud") return "audience"
    if (error.claim === "iss" || error.claim === "sub") return "issuer_subject"
    if (error.claim === "nbf" || error.claim === "iat") return "iat_in_future"
    return "missing_claim"
  }
  return "malformed_assertion"
}

/** Throw-away public keys, one per key type, made on first use: they verify nothing, at the usual cost. */
const decoys = new Map<string, Promise<CryptoKey>>()
const decoyFor = (alg: string) => {
  const family = alg.startsWith("RS") || alg.startsWith("PS") ? "RS256" : alg === "ES256" ? "ES256" : "Ed25519"
  let key = decoys.get(family)
  if (key === undefined) {
    key = jose.generateKeyPair(family).then((pair) => pair.publicKey)
    decoys.set(family, key)
  }
  return key
}

const make = Effect.gen(function*() {
  const config = yield* AppConfig
  const registry = yield* ClientRegistry
  const remote = yield* RemoteJwks
  const jtis = yield* JtiStore
  const { issuer, token_endpoint: tokenEndpoint } = discoveryDocument(config)
  const audiences = new Set([issuer, tokenEndpoint])
  // Verifiers of held keys, made once per set of keys (the registry hands out the same object until they change).
  const inline = new WeakMap<object, jose.JWTVerifyGetKey>()

  const decoyVerify = (assertion: string, alg: string) =>
    Effect.promise(() => decoyFor(alg).then((key) => jose.compactVerify(assertion, key, { algorithms: [alg] })).catch(() => undefined))

  const verifyWith = (assertion: string, subject: string, select: jose.JWTVerifyGetKey, now: number) => {
    const options: jose.JWTVerifyOptions = {
      algorithms: [...algorithms],
      issuer: subject,
      subject,
      audience: [...audiences],
      clockTolerance: ASSERTION_SKEW_SECONDS,
      requiredClaims: REQUIRED_CLAIMS,
      currentDate: new Date(now)
    }
    return Effect.tryPromise({
      try: async () => {
        try {
          return await jose.jwtVerify(assertion, select, options)
        } catch (error) {
          // No kid, several keys of the type: jose hands the candidates over; the first that verifies is the key.
          if (!(error instanceof jose.errors.JWKSMultipleMatchingKeys)) throw error
          let last: unknown = new jose.errors.JWSSignatureVerificationFailed()
          for await (const key of error as unknown as AsyncIterable<CryptoKey>) {
            try {
              return await jose.jwtVerify(assertion, key, options)
            } catch (attempt) {
              last = attempt
            }
          }
          throw last
        }
      },
      catch: (error) => failed(reasonFromJose(error))
    })
  }

  const authenticate: ClientAssertionShape["authenticate"] = (input) =>
    Effect.gen(function*() {
      if (input.assertionType !== JwtBearerAssertionType) return yield* failed("assertion_type")
      const assertion = input.assertion
      if (assertion === undefined || assertion.length > MAX_ASSERTION_LENGTH) return yield* failed("malformed_assertion")
      let alg: unknown
      try {
        alg = jose.decodeProtectedHeader(assertion).alg
      } catch {
        return yield* failed("malformed_assertion")
      }
      // First, whatever else is wrong: `none` (an empty signature) and HMAC never get further.
      if (typeof alg !== "string" || !algorithms.includes(alg)) return yield* failed("assertion_alg")
      if (!JWS_COMPACT.test(assertion)) return yield* failed("malformed_assertion")
      let claims: jose.JWTPayload
      try {
        claims = jose.decodeJwt(assertion)
      } catch {
        return yield* failed("malformed_assertion")
      }
      const algorithm = alg
      const { iss, sub } = claims
      if (typeof iss !== "string" || typeof sub !== "string") return yield* failed("missing_claim")
      if (iss !== sub) return yield* failed("issuer_subject")
      if (input.clientId !== undefined && input.clientId !== sub) return yield* failed("client_id_mismatch")

      const client = yield* registry.get(sub)
      if (client === undefined || client.auth.method !== "private_key_jwt") {
        yield* decoyVerify(assertion, algorithm)
        return yield* failed(client === undefined ? "unknown_client" : "wrong_method")
      }
      const now = yield* Clock.currentTimeMillis
      const keys = client.auth.keys
      let verification: Effect.Effect<jose.JWTVerifyResult, ClientAuthFailed>
      if (keys._tag === "Inline") {
        let select = inline.get(keys)
        if (select === undefined) inline.set(keys, (select = keySelector(keys.jwks)))
        verification = verifyWith(assertion, sub, select, now)
      } else {
        const held = yield* Effect.mapError(remote.keys(sub, keys.uri), () => failed("jwks_unavailable"))
        verification = verifyWith(assertion, sub, held.select, now).pipe(
          Effect.catchIf((e) => e.reason === "unknown_kid", (unknownKid) =>
            Effect.flatMap(Effect.mapError(remote.refetch(sub, keys.uri, held), () => failed("jwks_unavailable")), (fresh) =>
              fresh === held ? Effect.fail(unknownKid) : verifyWith(assertion, sub, fresh.select, now)))
        )
      }
      const verified = yield* verification.pipe(
        // No key was tried: spend a verification anyway.
        Effect.tapError((e) => (e.reason === "unknown_kid" ? decoyVerify(assertion, algorithm) : Effect.void))
      )
      return yield* checkClaims(client, verified.payload, now)
    })

  /** What jose leaves to us: every `aud`, how far `exp` and `iat` lie ahead, `jti`; then status and reuse. */
  const checkClaims = (client: OAuthClient, payload: jose.JWTPayload, now: number) =>
    Effect.gen(function*() {
      const { aud, exp, iat, jti } = payload
      const nowSeconds = now / 1000
      if (!(Array.isArray(aud) ? aud : [aud]).every((a) => typeof a === "string" && audiences.has(a))) return yield* failed("audience")
      if (exp! > nowSeconds + MAX_ASSERTION_LIFETIME_SECONDS + ASSERTION_SKEW_SECONDS) return yield* failed("exp_too_far")
      if (iat! > nowSeconds + ASSERTION_SKEW_SECONDS) return yield* failed("iat_in_future")
      if (typeof jti !== "string" || jti.length === 0 || jti.length > 256) return yield* failed("missing_claim")
      if (client.status !== "active") return yield* failed("revoked")
      const fresh = yield* jtis.claim(client.clientId, jti, (exp! + ASSERTION_SKEW_SECONDS) * 1000)
      if (!fresh) return yield* failed("replayed_jti")
      return client
    })

  return ClientAssertion.of({ authenticate })
})

export class ClientAssertion extends Context.Service<ClientAssertion, ClientAssertionShape>()("app/oauth/ClientAssertion") {
  static readonly layer: Layer.Layer<ClientAssertion, never, AppConfig | ClientRegistry | RemoteJwks | JtiStore> = Layer.effect(
    ClientAssertion,
    make
  )
}
