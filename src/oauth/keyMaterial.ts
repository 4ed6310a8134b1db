/**
 * ES256 (P-256) key material for access tokens (RFC 9068): the JWK shapes, RFC 7638 thumbprints, new keys,
 * and the imported state that signs and verifies without parsing a key on the hot path.
 */
import { Schema } from "effect"
import * as jose from "jose"

export const SIGNING_ALG = "ES256"

export const Base64Url = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_-]+$/, { expected: "base64url" }))

/** A published key, exactly as served at /.well-known/jwks.json. */
export const PublicJwk = Schema.Struct({
  kty: Schema.Literal("EC"),
  crv: Schema.Literal("P-256"),
  x: Base64Url,
  y: Base64Url,
  kid: Schema.String,
  alg: Schema.Literal(SIGNING_ALG),
  use: Schema.Literal("sig")
})
export type PublicJwk = typeof PublicJwk.Type

export const PrivateJwk = Schema.Struct({ ...PublicJwk.fields, d: Base64Url })
export type PrivateJwk = typeof PrivateJwk.Type

export interface Jwks {
  readonly keys: ReadonlyArray<PublicJwk>
}

export interface SigningKey {
  readonly kid: string
  readonly privateKey: CryptoKey
}

/** One key with its history; the first of a list signs, the others only verify. */
export interface KeyEntry {
  readonly jwk: PublicJwk | PrivateJwk
  readonly createdAt: string
  readonly retiredAt: string | undefined
}

/** Imported, ready-to-use state: built once per load, so the hot path does no key parsing. */
export interface KeyState {
  readonly signing: SigningKey
  readonly verify: ReadonlyMap<string, CryptoKey>
  readonly jwks: Jwks
}

export const publicPart = (jwk: { readonly x: string; readonly y: string; readonly kid: string }): PublicJwk => ({
  kty: "EC",
  crv: "P-256",
  x: jwk.x,
  y: jwk.y,
  kid: jwk.kid,
  alg: SIGNING_ALG,
  use: "sig"
})

/** RFC 7638 thumbprint (SHA-256, base64url) of the public members. */
export const thumbprint = (jwk: { readonly x: string; readonly y: string }): Promise<string> =>
  jose.calculateJwkThumbprint({ kty: "EC", crv: "P-256", x: jwk.x, y: jwk.y }, "sha256")

/** A new ES256 private JWK with `kid`, `alg`, `use`; also what `clients.ts generate-key` prints. */
export const generateSigningJwk = async (): Promise<PrivateJwk> => {
  const { privateKey } = await jose.generateKeyPair(SIGNING_ALG, { extractable: true })
  const jwk = await jose.exportJWK(privateKey)
  if (jwk.x === undefined || jwk.y === undefined || jwk.d === undefined) throw new Error("exportJWK gave no EC members")
  const kid = await thumbprint({ x: jwk.x, y: jwk.y })
  return { ...publicPart({ x: jwk.x, y: jwk.y, kid }), d: jwk.d }
}

export const isPrivate = (jwk: PublicJwk | PrivateJwk): jwk is PrivateJwk => "d" in jwk && typeof jwk.d === "string"

/**
 * Imports the keys; the first must be private. A sign-then-verify self test catches a private key whose
 * public half does not match before any token is issued with it.
 */
export const buildState = async (entries: ReadonlyArray<KeyEntry>): Promise<KeyState> => {
  const [first] = entries
  if (first === undefined || !isPrivate(first.jwk)) throw new Error("the first key must be a private key")
  const privateKey = (await jose.importJWK(
    { kty: "EC", crv: "P-256", x: first.jwk.x, y: first.jwk.y, d: first.jwk.d },
    SIGNING_ALG
  )) as CryptoKey
  const verify = new Map<string, CryptoKey>()
  for (const e of entries) {
    if (verify.has(e.jwk.kid)) throw new Error(`two keys share the kid ${e.jwk.kid}`)
    verify.set(e.jwk.kid, (await jose.importJWK({ kty: "EC", crv: "P-256", x: e.jwk.x, y: e.jwk.y }, SIGNING_ALG)) as CryptoKey)
  }
  const probe = await new jose.CompactSign(new TextEncoder().encode("self-test")).setProtectedHeader({ alg: SIGNING_ALG })
    .sign(privateKey)
  await jose.compactVerify(probe, verify.get(first.jwk.kid)!).catch(() => {
    throw new Error("the signing key's private part does not match its public part")
  })
  return {
    signing: { kid: first.jwk.kid, privateKey },
    verify,
    jwks: { keys: entries.map((e) => publicPart(e.jwk)) }
  }
}

export const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e))
