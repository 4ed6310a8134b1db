/**
 * The public keys of a `private_key_jwt` client (RFC 7523 §2.2, CONTRACT C6): the JWK shapes a client may
 * register (RSA of 2048 bits or more, EC P-256, OKP Ed25519; public members only), how a registered or
 * fetched JWKS is checked, and the verifier jose builds from it.
 *
 * Every stored key has a `kid`: the one given, else its RFC 7638 thumbprint, so that operators can name
 * keys and an assertion naming either finds its key. A key's `alg`, when given, binds it to that algorithm
 * (jose's key selection); `EdDSA` and `Ed25519` name the same one, so an OKP key's `alg` is not kept.
 */
import { Effect, Result, Schema } from "effect"
import * as jose from "jose"
import { ClientAssertionAlgorithms } from "../api/schemas.ts"
import { Base64Url } from "./keyMaterial.ts"

/** At most this many keys per client: an assertion without `kid` is tried against each key of its type. */
const MAX_CLIENT_KEYS = 20

const common = {
  kid: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256)),
  use: Schema.optionalKey(Schema.Literal("sig")),
  alg: Schema.optionalKey(Schema.Literals(["RS256", "PS256", "ES256"]))
}

const RsaJwk = Schema.Struct({ kty: Schema.Literal("RSA"), n: Base64Url, e: Base64Url, ...common })
const EcJwk = Schema.Struct({ kty: Schema.Literal("EC"), crv: Schema.Literal("P-256"), x: Base64Url, y: Base64Url, ...common })
const OkpJwk = Schema.Struct({ kty: Schema.Literal("OKP"), crv: Schema.Literal("Ed25519"), x: Base64Url, ...common })

/** A stored public key (members other than these are dropped). */
const ClientJwk = Schema.Union([RsaJwk, EcJwk, OkpJwk])
type ClientJwk = typeof ClientJwk.Type

export const ClientJwks = Schema.Struct({ keys: Schema.Array(ClientJwk).check(Schema.isMinLength(1), Schema.isMaxLength(MAX_CLIENT_KEYS)) })
export type ClientJwks = typeof ClientJwks.Type

/** Members that only private or symmetric keys have. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

/** A key as given: `kid` may be missing (it gets its thumbprint). */
const GivenJwk = Schema.Union([
  Schema.Struct({ ...RsaJwk.fields, kid: Schema.optionalKey(common.kid) }),
  Schema.Struct({ ...EcJwk.fields, kid: Schema.optionalKey(common.kid) }),
  Schema.Struct({ ...OkpJwk.fields, kid: Schema.optionalKey(common.kid), alg: Schema.optionalKey(Schema.Literals(["EdDSA", "Ed25519"])) })
])
const decodeGiven = Schema.decodeUnknownResult(GivenJwk)

const algorithmFor = (jwk: { readonly kty: string; readonly alg?: string }) =>
  jwk.kty === "EC" ? "ES256" : jwk.kty === "OKP" ? "EdDSA" : (jwk.alg ?? "RS256")

/** Bits of an RSA modulus (base64url, big-endian, leading zero bytes not counted). */
const modulusBits = (n: string) => {
  const bytes = Buffer.from(n, "base64url")
  let i = 0
  while (i < bytes.length && bytes[i] === 0) i++
  return i === bytes.length ? 0 : (bytes.length - i - 1) * 8 + (32 - Math.clz32(bytes[i]!))
}

/** One key checked and completed, or why it cannot be used (never echoing key material). */
const checkKey = async (raw: unknown, index: number): Promise<ClientJwk | string> => {
  const where = `keys[${index}]`
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return `${where} is not a JSON object`
  const present = PRIVATE_MEMBERS.filter((m) => m in raw)
  if (present.length > 0) {
    return `${where} holds private or symmetric key material (${present.join(", ")}): register the public key only`
  }
  const decoded = decodeGiven(raw)
  if (Result.isFailure(decoded)) {
    return `${where} must be a public signing key: RSA (n, e), EC P-256 (x, y) or OKP Ed25519 (x), with "use" sig and "alg" ` +
      `one of ${ClientAssertionAlgorithms.join(", ")} when given`
  }
  const { alg, kid, ...jwk } = decoded.success
  if (jwk.kty === "RSA" && modulusBits(jwk.n) < 2048) return `${where} is an RSA key of fewer than 2048 bits`
  if ((jwk.kty === "RSA" && alg === "ES256") || (jwk.kty === "EC" && alg !== undefined && alg !== "ES256")) {
    return `${where} has "alg" ${alg}, which its key type cannot sign with`
  }
  const kept = jwk.kty === "OKP" || alg === undefined ? jwk : { ...jwk, alg }
  try {
    // Proves the members make a key (an EC point on its curve, a usable modulus).
    await jose.importJWK({ ...kept }, algorithmFor(kept))
    return { ...kept, kid: kid ?? (await jose.calculateJwkThumbprint({ ...kept }, "sha256")) } as ClientJwk
  } catch {
    return `${where} is not a valid ${jwk.kty} public key`
  }
}

const keysOf = (input: unknown): ReadonlyArray<unknown> | string => {
  const keys = (input as { keys?: unknown } | null)?.keys
  if (typeof input !== "object" || input === null || !Array.isArray(keys)) return `expected a JWK Set: {"keys": [...]}`
  return keys
}

/**
 * A JWKS an operator registers: every key must be usable, 1 to 20 of them, `kid`s distinct. Fails with
 * the first problem, in words an operator can act on.
 */
export const checkRegisteredJwks = (input: unknown): Effect.Effect<ClientJwks, string> =>
  Effect.gen(function*() {
    const keys = keysOf(input)
    if (typeof keys === "string") return yield* Effect.fail(keys)
    if (keys.length === 0 || keys.length > MAX_CLIENT_KEYS) return yield* Effect.fail(`expected 1 to ${MAX_CLIENT_KEYS} keys, got ${keys.length}`)
    const checked: Array<ClientJwk> = []
    for (const [i, raw] of keys.entries()) {
      const key = yield* Effect.promise(() => checkKey(raw, i))
      if (typeof key === "string") return yield* Effect.fail(key)
      if (checked.some((k) => k.kid === key.kid)) return yield* Effect.fail(`keys[${i}] repeats the kid ${JSON.stringify(key.kid)}`)
      checked.push(key)
    }
    return { keys: checked }
  })

/**
 * A JWKS fetched from a client's `jwks_uri`: keys this service cannot use are skipped (RFC 7517 §5: a
 * set may hold keys for others), the first 20 usable ones kept. `undefined` when the document is no JWKS.
 */
export const readPublishedJwks = async (input: unknown): Promise<{ readonly jwks: ClientJwks; readonly skipped: number } | undefined> => {
  const keys = keysOf(input)
  if (typeof keys === "string") return undefined
  const usable: Array<ClientJwk> = []
  for (const [i, raw] of keys.entries()) {
    if (usable.length === MAX_CLIENT_KEYS) break
    const key = await checkKey(raw, i)
    if (typeof key !== "string") usable.push(key)
  }
  return { jwks: { keys: usable }, skipped: keys.length - usable.length }
}

/** jose's key selection over the keys (by `kid`, key type and `alg`); keys are imported once, on first use. */
export const keySelector = (jwks: ClientJwks): jose.JWTVerifyGetKey =>
  jose.createLocalJWKSet({ keys: jwks.keys.map((k) => ({ ...k })) })
