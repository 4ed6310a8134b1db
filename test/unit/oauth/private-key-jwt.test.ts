/**
 * Issue 34, private_key_jwt (RFC 7523 §2.2, §3; CONTRACT C6) at the token endpoint's core, on a clock the
 * test moves: each refusal of the issue is a 401 invalid_client with the same body whatever check
 * failed, refused for its own reason (the outcome the access log gets), and counted by the failure
 * limiter (the limit is 1 here: the next good assertion from that address is a 429). The secret method
 * stays the only way in for secret clients, and the reverse.
 */
import { Effect, Logger, References } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { TokenErrorBody } from "../../../src/api/tokenResponse.ts"
import { TokenEndpoint } from "../../../src/oauth/TokenEndpoint.ts"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import {
  type AssertionClaims,
  assertionFor,
  assertionForm,
  type ClientKey,
  hmacWithPublicKey,
  jwksOf,
  makeKey,
  serveJwks,
  unsigned
} from "../../support/assertionKit.ts"
import { basic, BASE, FORM, makeFakeClock, memoryRuntime } from "../../support/oauth.ts"

const clock = makeFakeClock()
let jwksServer: Awaited<ReturnType<typeof serveJwks>>
let runtime: ReturnType<typeof memoryRuntime>
let production: ReturnType<typeof memoryRuntime>
let ec: ClientKey
let rsa: ClientKey
let published: ClientKey
let stranger: ClientKey

beforeAll(async () => {
  ;[ec, rsa, published, stranger] = await Promise.all([makeKey("ES256"), makeKey("RS256"), makeKey("ES256"), makeKey("ES256")])
  jwksServer = await serveJwks(jwksOf(published))
  const clients = [
    { name: "Inline", clientId: "pk-inline", scopes: ["rates:read", "health:read"], keys: { jwks: jwksOf(ec, rsa) } },
    { name: "By URI", clientId: "pk-uri", scopes: ["rates:read"], keys: { jwksUri: jwksServer.url } },
    // The same server by https: in production the scheme is right, the address is not.
    { name: "Loopback", clientId: "pk-loopback", scopes: ["rates:read"], keys: { jwksUri: `https://127.0.0.1:${jwksServer.port}/jwks.json` } },
    { name: "Gone", clientId: "pk-revoked", scopes: ["rates:read"], keys: { jwks: jwksOf(ec) } },
    { name: "Secret", clientId: "svc-secret", secret: "the-secret", scopes: ["rates:read"] }
  ]
  runtime = memoryRuntime({ clients, maxFailuresPerMinute: 1, clock })
  production = memoryRuntime({ clients, maxFailuresPerMinute: 1, clock, env: { APP_ENV: "production" } })
  await runtime.runPromise(Effect.flatMap(ClientRegistry, (r) => r.revoke("pk-revoked")))
})
afterAll(async () => {
  await runtime?.dispose()
  await production?.dispose()
  await jwksServer?.close()
})

let addresses = 0
/** Each case from an address of its own, so that the failure limit it reaches is its own. */
const nextAddress = () => `198.51.100.${++addresses}`

const handle = (
  body: string,
  options: { readonly address?: string; readonly authorization?: string; readonly on?: ReturnType<typeof memoryRuntime> } = {}
) =>
  (options.on ?? runtime).runPromise(Effect.flatMap(TokenEndpoint, (endpoint) =>
    endpoint.handle({ authorization: options.authorization, contentType: FORM, body, clientIp: options.address ?? nextAddress() })))

const statusOf = async (body: string) => (await handle(body)).status

const sign = (key: ClientKey, clientId: string, claims: AssertionClaims = {}, header: Record<string, unknown> = {}) =>
  assertionFor(key, clientId, { nowMs: clock.now(), audience: BASE, claims, header })

const nowSeconds = () => Math.floor(clock.now() / 1000)

/** The one body of a refused assertion (instance aside): nothing in it says which check failed. */
const refusalBodies = new Set<string>()

/** 401 invalid_client for `reason`, then the client's good assertion from that address is a 429 (counted). */
const expectRefusedAndCounted = async (body: string, reason: string, clientId = "pk-inline") => {
  const address = nextAddress()
  const refused = await handle(body, { address })
  expect(refused.status).toBe(401)
  expect(refused.outcome).toMatchObject({ result: "invalid_client", reason })
  expect(refused.headers["www-authenticate"]).toBe('Basic realm="oauth"')
  const { instance: _, ...json } = refused.json as TokenErrorBody
  expect(json).toMatchObject({ error: "invalid_client", status: 401, code: "invalid_client" })
  refusalBodies.add(JSON.stringify(json))
  const key = clientId === "pk-uri" ? published : ec
  const next = await handle(assertionForm(await sign(key, clientId)), { address })
  expect(next.status).toBe(429)
  expect(next.outcome.result).toBe("rate_limited")
}

describe("private_key_jwt: accepted", () => {
  it("issues a token for an assertion signed with a registered key (aud the issuer)", async () => {
    const res = await handle(assertionForm(await sign(ec, "pk-inline"), { scope: "rates:read" }))
    expect(res.status).toBe(200)
    expect(res.json).toMatchObject({ token_type: "Bearer", scope: "rates:read", expires_in: 900 })
    expect(res.outcome).toEqual({ result: "issued", reason: "ok", clientId: "pk-inline" })
  })

  it("accepts aud = the token endpoint URL, a matching client_id, every key of the set, and a key found without kid", async () => {
    expect(await statusOf(assertionForm(await sign(rsa, "pk-inline", { aud: `${BASE}/oauth/token` })))).toBe(200)
    expect(await statusOf(assertionForm(await sign(ec, "pk-inline"), { client_id: "pk-inline" }))).toBe(200)
    expect(await statusOf(assertionForm(await sign(ec, "pk-inline", {}, { kid: undefined })))).toBe(200)
  })

  it("finds the key without kid among several of its type (each tried), and refuses when none verifies", async () => {
    const [first, second] = [await makeKey("ES256"), await makeKey("ES256")]
    await runtime.runPromise(Effect.flatMap(ClientRegistry, (r) =>
      r.createWithKeys({ name: "Two EC", clientId: "pk-two-ec", scopes: ["rates:read"], keys: { jwks: jwksOf(first, second) } })))
    expect(await statusOf(assertionForm(await sign(second, "pk-two-ec", {}, { kid: undefined })))).toBe(200)
    expect(await statusOf(assertionForm(await sign(first, "pk-two-ec", {}, { kid: undefined })))).toBe(200)
    const refused = await handle(assertionForm(await sign(stranger, "pk-two-ec", {}, { kid: undefined })))
    expect(refused.outcome).toMatchObject({ result: "invalid_client", reason: "bad_signature" })
  })

  it("tolerates 60 s of clock skew: exp 50 s passed, iat 50 s ahead, exp 5 min ahead of a clock 50 s fast", async () => {
    const now = nowSeconds()
    expect(await statusOf(assertionForm(await sign(ec, "pk-inline", { exp: now - 50, iat: now - 100 })))).toBe(200)
    expect(await statusOf(assertionForm(await sign(ec, "pk-inline", { iat: now + 50, exp: now + 110 })))).toBe(200)
    expect(await statusOf(assertionForm(await sign(ec, "pk-inline", { iat: now + 50, exp: now + 350 })))).toBe(200)
  })

  it("fetches a jwks_uri client's keys once and serves them from memory", async () => {
    const before = jwksServer.fetches()
    for (let i = 0; i < 3; i++) expect((await handle(assertionForm(await sign(published, "pk-uri")))).status).toBe(200)
    expect(jwksServer.fetches() - before).toBeLessThanOrEqual(1)
  })
})

describe("private_key_jwt: each refusal is invalid_client, counted by the failure limiter", () => {
  it("a replayed jti", async () => {
    const assertion = await sign(ec, "pk-inline")
    expect((await handle(assertionForm(assertion))).status).toBe(200)
    await expectRefusedAndCounted(assertionForm(assertion), "replayed_jti")
  })

  it("exp passed (beyond the skew)", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline", { iat: nowSeconds() - 200, exp: nowSeconds() - 61 })), "expired")
  })

  it("exp more than 5 minutes ahead (beyond the skew)", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline", { exp: nowSeconds() + 361 })), "exp_too_far")
  })

  it("a wrong aud", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline", { aud: "https://other.example" })), "audience")
  })

  it("an aud naming this server and another one", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline", { aud: [BASE, "https://other.example"] })), "audience")
  })

  it("iss ≠ sub", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline", { iss: "someone-else" })), "issuer_subject")
  })

  it("a client_id naming another client than the assertion", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline"), { client_id: "pk-uri" }), "client_id_mismatch", "pk-uri")
  })

  it("an unknown client", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "no-such-client")), "unknown_client", "no-such-client")
  })

  it("alg none", async () => {
    const now = nowSeconds()
    const none = unsigned({ iss: "pk-inline", sub: "pk-inline", aud: BASE, iat: now, exp: now + 60, jti: "none-1" })
    await expectRefusedAndCounted(assertionForm(none), "assertion_alg")
  })

  it("HS256 signed with the public key's bytes", async () => {
    const now = nowSeconds()
    const forged = await hmacWithPublicKey(ec, { iss: "pk-inline", sub: "pk-inline", aud: BASE, iat: now, exp: now + 60, jti: "hs-1" })
    await expectRefusedAndCounted(assertionForm(forged), "assertion_alg")
  })

  it("a kid in no key", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline", {}, { kid: "no-such-kid" })), "unknown_kid")
  })

  it("a key of the wrong type: RS256 naming the EC key", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(rsa, "pk-inline", {}, { kid: ec.kid })), "unknown_kid")
  })

  it("a signature by a key the client never registered", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(stranger, "pk-inline", {}, { kid: ec.kid })), "bad_signature")
  })

  it("iat in the future, no jti", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline", { iat: nowSeconds() + 61, exp: nowSeconds() + 120 })), "iat_in_future")
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline", { jti: undefined })), "missing_claim")
  })

  it("a revoked client", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-revoked")), "revoked", "pk-revoked")
  })

  it("another assertion type", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "pk-inline"), { client_assertion_type: "urn:other" }), "assertion_type")
  })

  it("a garbled assertion names no client: counted for its address (ten times the limit)", async () => {
    const address = nextAddress()
    for (let i = 0; i < 10; i++) {
      const refused = await handle(assertionForm("eyJhbGciOiJFUzI1NiJ9.not json.x"), { address })
      expect(refused.outcome).toMatchObject({ result: "invalid_client", reason: "malformed_assertion" })
      refusalBodies.add(JSON.stringify({ ...(refused.json as TokenErrorBody), instance: undefined }))
    }
    const next = await handle(assertionForm(await sign(ec, "pk-inline")), { address })
    expect(next.json).toMatchObject({ code: "rate_limited", status: 429 })
  })

  it("the secret method used by a key client", async () => {
    const address = nextAddress()
    const refused = await handle("grant_type=client_credentials", { address, authorization: basic("pk-inline", "any-secret") })
    expect(refused.status).toBe(401)
    expect(refused.outcome).toMatchObject({ result: "invalid_client", reason: "wrong_method" })
    expect((await handle(assertionForm(await sign(ec, "pk-inline")), { address })).status).toBe(429)
  })

  it("an assertion used by a secret client", async () => {
    await expectRefusedAndCounted(assertionForm(await sign(ec, "svc-secret")), "wrong_method", "svc-secret")
    // Its secret still works, from another address.
    expect((await handle("grant_type=client_credentials", { authorization: basic("svc-secret", "the-secret") })).status).toBe(200)
  })

  it("a jwks_uri at 127.0.0.1 in production, never fetched (https or not)", async () => {
    const before = jwksServer.fetches()
    for (const clientId of ["pk-loopback", "pk-uri"]) {
      const address = nextAddress()
      const refused = await handle(assertionForm(await sign(published, clientId)), { address, on: production })
      expect(refused.status).toBe(401)
      expect(refused.outcome).toMatchObject({ result: "invalid_client", reason: "jwks_unavailable" })
      expect((await handle(assertionForm(await sign(published, clientId)), { address, on: production })).status).toBe(429)
    }
    expect(jwksServer.fetches()).toBe(before)
  })

  it("the service logs why (never the assertion): the operator helping an integrator can tell", async () => {
    const lines: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
    const capture = Logger.layer([Logger.make((options) =>
      lines.push({ message: options.message, annotations: { ...options.fiber.getRef(References.CurrentLogAnnotations) } }))])
    const assertion = await sign(ec, "pk-inline", { aud: "https://other.example" })
    await runtime.runPromise(Effect.flatMap(TokenEndpoint, (endpoint) =>
      endpoint.handle({ authorization: undefined, contentType: FORM, body: assertionForm(assertion), clientIp: nextAddress() })).pipe(Effect.provide(capture)))
    expect(lines.map((l) => [l.message, l.annotations])).toEqual([
      [["oauth: client assertion refused"], { reason: "audience", clientId: "pk-inline", clientIp: expect.any(String) }]
    ])
    expect(JSON.stringify(lines)).not.toContain(assertion.split(".")[2])
  })

  it("every refused assertion got the same body, whatever the check", () => {
    expect(refusalBodies.size).toBe(1)
    const [body] = [...refusalBodies].map((b) => JSON.parse(b))
    expect(body.error_description).toBe("Client authentication failed.")
  })
})

describe("private_key_jwt: the request's shape", () => {
  it("400 invalid_request for an assertion next to Basic, or next to a client_secret", async () => {
    const assertion = await sign(ec, "pk-inline")
    expect((await handle(assertionForm(assertion), { authorization: basic("svc-secret", "the-secret") })).status).toBe(400)
    expect((await handle(assertionForm(assertion, { client_secret: "x" }))).status).toBe(400)
  })

  it("400 for a missing or other grant, after the assertion's client was counted as blocked or not", async () => {
    const form = new URLSearchParams(assertionForm(await sign(ec, "pk-inline")))
    form.delete("grant_type")
    expect((await handle(form.toString())).json).toMatchObject({ error: "invalid_request" })
    form.set("grant_type", "password")
    expect((await handle(form.toString())).json).toMatchObject({ error: "unsupported_grant_type" })
  })

  it("400 invalid_scope for a scope the key client may not have", async () => {
    const res = await handle(assertionForm(await sign(ec, "pk-inline"), { scope: "subscriptions:write" }))
    expect(res.json).toMatchObject({ error: "invalid_scope" })
  })
})
