/**
 * What a private_key_jwt integrator has (RFC 7523): key pairs of each algorithm the service accepts,
 * assertions signed with them, and a JWKS published over HTTP (a `jwks_uri`) that the test can change.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { randomUUID } from "node:crypto"
import * as jose from "jose"
import { JwtBearerAssertionType } from "../../src/api/schemas.ts"

export type KeyAlg = "ES256" | "RS256" | "PS256" | "EdDSA"
export const KEY_ALGS: ReadonlyArray<KeyAlg> = ["ES256", "RS256", "PS256", "EdDSA"]

export interface ClientKey {
  readonly alg: KeyAlg
  readonly kid: string
  readonly privateKey: CryptoKey
  readonly publicKey: CryptoKey
  /** The public JWK as an integrator registers or publishes it (with `kid`, `use`). */
  readonly publicJwk: jose.JWK
}

export const makeKey = async (alg: KeyAlg, kid = `${alg.toLowerCase()}-${randomUUID().slice(0, 8)}`): Promise<ClientKey> => {
  const { privateKey, publicKey } = await jose.generateKeyPair(alg === "EdDSA" ? "Ed25519" : alg, { extractable: true })
  return { alg, kid, privateKey, publicKey, publicJwk: { ...(await jose.exportJWK(publicKey)), kid, use: "sig" } }
}

export const jwksOf = (...keys: ReadonlyArray<ClientKey>) => ({ keys: keys.map((k) => k.publicJwk) })

export interface AssertionClaims {
  readonly iss?: string | undefined
  readonly sub?: string | undefined
  readonly aud?: string | ReadonlyArray<string> | undefined
  readonly exp?: number | undefined
  readonly iat?: number | undefined
  readonly jti?: string | undefined
  readonly [claim: string]: unknown
}

/**
 * An assertion for `clientId` at `nowMs`: aud the issuer, exp a minute ahead, a fresh jti; `claims`
 * override (an `undefined` value removes the claim), `header` adds to or overrides the protected header.
 */
export const assertionFor = (
  key: ClientKey,
  clientId: string,
  options: { readonly nowMs: number; readonly audience: string; readonly claims?: AssertionClaims; readonly header?: Record<string, unknown> }
): Promise<string> => {
  const now = Math.floor(options.nowMs / 1000)
  const claims: Record<string, unknown> = { iss: clientId, sub: clientId, aud: options.audience, iat: now, exp: now + 60, jti: randomUUID(), ...options.claims }
  for (const [name, value] of Object.entries(claims)) if (value === undefined) delete claims[name]
  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, ...options.header } as jose.JWTHeaderParameters)
    .sign(key.privateKey)
}

/** `alg: none`: a header and claims with an empty signature. */
export const unsigned = (claims: Record<string, unknown>) => {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url")
  return `${part({ alg: "none" })}.${part(claims)}.`
}

/** HS256 with the client's public key (its SPKI PEM) as the HMAC secret: the classic algorithm confusion. */
export const hmacWithPublicKey = async (key: ClientKey, claims: Record<string, unknown>) => {
  const pem = await jose.exportSPKI(key.publicKey)
  return new jose.SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: key.kid }).sign(new TextEncoder().encode(pem))
}

/** The token request's form for an assertion. */
export const assertionForm = (assertion: string, extra: Record<string, string> = {}) =>
  new URLSearchParams({
    grant_type: "client_credentials",
    client_assertion_type: JwtBearerAssertionType,
    client_assertion: assertion,
    ...extra
  }).toString()

/** A `jwks_uri` on 127.0.0.1: serves what `publish` last set, counts fetches, records the Host each came with. */
export const serveJwks = async (initial: unknown, headers: Record<string, string> = { "cache-control": "max-age=600" }) => {
  let document: unknown = initial
  let answerHeaders = headers
  let body: string | undefined
  const hosts: Array<string> = []
  const server = http.createServer((req, res) => {
    hosts.push(req.headers.host ?? "")
    res.writeHead(200, { "content-type": "application/json", ...answerHeaders })
    res.end(body ?? JSON.stringify(document))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/jwks.json`,
    port,
    /** Requests received so far. */
    fetches: () => hosts.length,
    hosts,
    publish: (next: unknown, nextHeaders: Record<string, string> = answerHeaders) => {
      document = next
      answerHeaders = nextHeaders
      body = undefined
    },
    /** Sends these bytes instead of the document (oversized or broken answers). */
    publishRaw: (text: string) => void (body = text),
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
