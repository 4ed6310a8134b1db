import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Exit, type ManagedRuntime } from "effect"
import * as jose from "jose"
import { afterEach, describe, expect, it } from "vitest"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import { generateSigningJwk, type PrivateJwk, thumbprint } from "../../../src/oauth/keyMaterial.ts"
import { SigningKeys } from "../../../src/oauth/SigningKeys.ts"
import { REQUIRED_CLAIMS, TokenService } from "../../../src/oauth/TokenService.ts"
import { AUDIENCE, BASE, eventually, fileRuntime, makeFakeClock, memoryRuntime, pastReloadInterval, tmpDataDir } from "../../support/oauth.ts"

type AnyRuntime = ManagedRuntime.ManagedRuntime<TokenService | SigningKeys | ClientRegistry, unknown>
const runtimes: Array<AnyRuntime> = []
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((r) => r.dispose()))
})
const keep = <R extends AnyRuntime>(r: R): R => {
  runtimes.push(r)
  return r
}

const PARTNER = { name: "Partner", scopes: ["health:read", "rates:read"], clientId: "partner", secret: "partner-secret" }

const issue = (r: AnyRuntime, scopes: ReadonlyArray<"health:read" | "rates:read"> = ["rates:read"], clientId = "partner") =>
  r.runPromise(Effect.flatMap(TokenService, (t) => t.issue({ clientId }, scopes)))
const verify = (r: AnyRuntime, token: string) => r.runPromise(Effect.flatMap(TokenService, (t) => t.verify(token)))
const reasonOf = async (r: AnyRuntime, token: string) =>
  (await r.runPromise(Effect.flatMap(TokenService, (t) => Effect.flip(t.verify(token))))).reason
const jwksOf = (r: AnyRuntime) => r.runPromise(Effect.flatMap(SigningKeys, (k) => k.jwks()))

describe("TokenService.issue", () => {
  it("issues RFC 9068 tokens that jose verifies with typ, algorithms and required claims", async () => {
    const clock = makeFakeClock()
    const r = keep(memoryRuntime({ clients: [PARTNER], clock }))
    const issued = await issue(r, ["rates:read", "health:read"])
    expect(issued).toMatchObject({ tokenType: "Bearer", expiresIn: 900, scope: "health:read rates:read" })

    const jwks = await jwksOf(r)
    const { payload, protectedHeader } = await jose.jwtVerify(issued.accessToken, jose.createLocalJWKSet({ keys: [...jwks.keys] }), {
      issuer: BASE,
      audience: AUDIENCE,
      typ: "at+jwt",
      algorithms: ["ES256"],
      requiredClaims: ["iss", "exp", "aud", "sub", "client_id", "iat", "jti", "scope"],
      currentDate: new Date(clock.now())
    })
    expect(protectedHeader).toEqual({ alg: "ES256", typ: "at+jwt", kid: jwks.keys[0]!.kid })
    const iat = Math.floor(clock.now() / 1000)
    expect(payload).toEqual({
      iss: BASE,
      sub: "partner",
      client_id: "partner",
      aud: AUDIENCE,
      iat,
      exp: iat + 900,
      jti: issued.jti,
      scope: "health:read rates:read"
    })
    expect(issued.jti).toMatch(/^[A-Za-z0-9_-]{22}$/)
    expect((await issue(r)).jti).not.toBe(issued.jti)
    expect(REQUIRED_CLAIMS).toEqual(expect.arrayContaining(["iss", "exp", "aud", "sub", "client_id", "iat", "jti"]))
  })

  it("uses TOKEN_TTL_SECONDS and the configured issuer", async () => {
    const r = keep(memoryRuntime({ clients: [PARTNER], env: { TOKEN_TTL_SECONDS: "300", PUBLIC_BASE_URL: "http://localhost:8080/" } }))
    const issued = await issue(r)
    const claims = jose.decodeJwt(issued.accessToken)
    expect(issued.expiresIn).toBe(300)
    expect(claims.exp! - claims.iat!).toBe(300)
    expect(claims.iss).toBe("http://localhost:8080")
    expect(claims.aud).toBe("http://localhost:8080/api")
  })

  it("publishes JWKS entries with kid = RFC 7638 thumbprint, alg ES256, use sig, and no private members", async () => {
    const r = keep(memoryRuntime())
    const { keys } = await jwksOf(r)
    expect(keys).toHaveLength(1)
    const key = keys[0]!
    expect(Object.keys(key).sort()).toEqual(["alg", "crv", "kid", "kty", "use", "x", "y"])
    expect(key).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" })
    expect(key.kid).toBe(await jose.calculateJwkThumbprint({ kty: "EC", crv: "P-256", x: key.x, y: key.y }))
  })
})

describe("TokenService.verify", () => {
  // Configured keys give the test the private key, so it can forge otherwise-valid tokens.
  const setup = async () => {
    const signer = await generateSigningJwk()
    const clock = makeFakeClock()
    const dir = tmpDataDir()
    const r = keep(fileRuntime(dir, { OAUTH_SIGNING_KEYS: JSON.stringify({ keys: [signer] }) }, clock))
    await r.runPromise(Effect.flatMap(ClientRegistry, (reg) => reg.create(PARTNER)))
    const key = await jose.importJWK(signer, "ES256")
    const iat = Math.floor(clock.now() / 1000)
    const claims = {
      iss: BASE,
      sub: "partner",
      client_id: "partner",
      aud: AUDIENCE,
      iat,
      exp: iat + 900,
      jti: "jti-1",
      scope: "rates:read"
    }
    const forge = (overrides: Record<string, unknown> = {}, header: Record<string, unknown> = {}, signingKey = key) =>
      new jose.SignJWT({ ...claims, ...overrides })
        .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: signer.kid, ...header } as jose.JWTHeaderParameters)
        .sign(signingKey)
    return { r, clock, forge, signer }
  }

  it("accepts a valid token and returns the principal", async () => {
    const { r, forge } = await setup()
    expect(await verify(r, await forge())).toEqual({ clientId: "partner", scopes: ["rates:read"] })
    expect(await verify(r, (await issue(r, ["health:read"])).accessToken)).toEqual({ clientId: "partner", scopes: ["health:read"] })
  })

  it("rejects each kind of bad token with a typed reason", async () => {
    const { r, forge, signer } = await setup()
    const good = await forge()
    const [h, p, s] = good.split(".")
    const otherKey = await jose.importJWK(await generateSigningJwk(), "ES256")
    const hsKey = new TextEncoder().encode("k".repeat(32))
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url")

    const flipped = s!.slice(0, 10) + (s![10] === "A" ? "B" : "A") + s!.slice(11)
    expect(await reasonOf(r, `${h}.${p}.${flipped}`)).toBe("bad_signature")
    expect(await reasonOf(r, await forge({}, {}, otherKey as CryptoKey))).toBe("bad_signature")
    expect(await reasonOf(r, `${h}.${b64({ ...jose.decodeJwt(good), scope: "health:read rates:read" })}.${s}`)).toBe("bad_signature")
    expect(await reasonOf(r, await forge({}, { kid: "unknown-kid" }))).toBe("unknown_kid")
    expect(await reasonOf(r, await forge({}, { kid: undefined }))).toBe("unknown_kid")
    expect(await reasonOf(r, await new jose.SignJWT(jose.decodeJwt(good)).setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: signer.kid }).sign(hsKey))).toBe("wrong_alg")
    expect(await reasonOf(r, `${b64({ alg: "none", typ: "at+jwt", kid: signer.kid })}.${p}.`)).toBe("malformed")
    expect(await reasonOf(r, `${b64({ alg: "none", typ: "at+jwt", kid: signer.kid })}.${p}.${s}`)).toBe("wrong_alg")
    expect(await reasonOf(r, await forge({}, { typ: "JWT" }))).toBe("wrong_typ")
    expect(await reasonOf(r, await forge({}, { typ: undefined }))).toBe("wrong_typ")
    expect(await reasonOf(r, await forge({ iss: `${BASE}/` }))).toBe("wrong_issuer")
    expect(await reasonOf(r, await forge({ aud: BASE }))).toBe("wrong_audience")
    expect(await reasonOf(r, await forge({ jti: undefined }))).toBe("bad_claims")
    expect(await reasonOf(r, await forge({ scope: undefined }))).toBe("bad_claims")
    expect(await reasonOf(r, await forge({ scope: ["rates:read"] }))).toBe("bad_claims")
    expect(await reasonOf(r, await forge({ scope: "rates:write" }))).toBe("bad_claims")
    expect(await reasonOf(r, await forge({ client_id: "someone-else" }))).toBe("bad_claims")
    expect(await reasonOf(r, await forge({ sub: "nobody", client_id: "nobody" }))).toBe("revoked_client")
    expect(await reasonOf(r, await forge({ nbf: Math.floor(Date.UTC(2027, 0, 1) / 1000) }))).toBe("not_yet_valid")
    for (const junk of ["", "abc", "a.b", "a.b.c", "a.b.c.d", `${h}.${p}`, `${h}..${s}`, "x".repeat(5000)]) {
      expect(await reasonOf(r, junk)).toBe("malformed")
    }
  })

  it("rejects an expired token (exp reached), accepts it one second earlier", async () => {
    const { r, clock } = await setup()
    const { accessToken } = await issue(r)
    clock.advance(899_000)
    expect((await verify(r, accessToken)).clientId).toBe("partner")
    clock.advance(1000)
    expect(await reasonOf(r, accessToken)).toBe("expired")
  })

  it("rejects tokens of a revoked client before they expire", async () => {
    const { r } = await setup()
    const { accessToken } = await issue(r)
    await r.runPromise(Effect.flatMap(ClientRegistry, (reg) => reg.revoke("partner")))
    expect(await reasonOf(r, accessToken)).toBe("revoked_client")
  })
})

describe("SigningKeys", () => {
  it("creates a 0600 key file on first start ('generated'), reuses it after ('file')", async () => {
    const dir = tmpDataDir()
    const first = keep(fileRuntime(dir))
    const k1 = await first.runPromise(SigningKeys)
    expect(k1.origin).toBe("generated")
    const file = path.join(dir, "oauth", "signing-keys.json")
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    const second = keep(fileRuntime(dir))
    const k2 = await second.runPromise(SigningKeys)
    expect(k2.origin).toBe("file")
    expect((await Effect.runPromise(k2.jwks())).keys[0]!.kid).toBe((await Effect.runPromise(k1.jwks())).keys[0]!.kid)
  })

  it("rotation keeps tokens signed by the previous key valid and publishes both keys", async () => {
    const dir = tmpDataDir()
    const r = keep(fileRuntime(dir))
    await r.runPromise(Effect.flatMap(ClientRegistry, (reg) => reg.create(PARTNER)))
    const before = await issue(r)
    const oldKid = jose.decodeProtectedHeader(before.accessToken).kid
    const rotation = await r.runPromise(Effect.flatMap(SigningKeys, (k) => k.rotate()))
    expect(rotation.kid).not.toBe(oldKid)
    expect(rotation.publishedKids).toEqual([rotation.kid, oldKid])

    const after = await issue(r)
    expect(jose.decodeProtectedHeader(after.accessToken).kid).toBe(rotation.kid)
    expect((await verify(r, before.accessToken)).clientId).toBe("partner")
    expect((await verify(r, after.accessToken)).clientId).toBe("partner")

    const jwks = await jwksOf(r)
    expect(jwks.keys.map((k) => k.kid)).toEqual([rotation.kid, oldKid])
    const local = jose.createLocalJWKSet({ keys: [...jwks.keys] })
    for (const t of [before, after]) {
      await jose.jwtVerify(t.accessToken, local, { issuer: BASE, audience: AUDIENCE, typ: "at+jwt", algorithms: ["ES256"] })
    }
    // The retired key keeps only its public part on disk.
    const stored = JSON.parse(fs.readFileSync(path.join(dir, "oauth", "signing-keys.json"), "utf8"))
    expect(stored.keys[0].jwk.d).toBeTypeOf("string")
    expect(stored.keys[1].jwk.d).toBeUndefined()
    expect(stored.keys[1].retired_at).toMatch(/^\d{4}-/)
  })

  it("a running server picks up a rotation made by another process within about a second", async () => {
    const dir = tmpDataDir()
    const server = keep(fileRuntime(dir))
    await server.runPromise(Effect.flatMap(ClientRegistry, (reg) => reg.create(PARTNER)))
    const before = await issue(server)
    const cli = keep(fileRuntime(dir))
    const rotation = await cli.runPromise(Effect.flatMap(SigningKeys, (k) => k.rotate()))
    const switched = await eventually(async () =>
      jose.decodeProtectedHeader((await issue(server)).accessToken).kid === rotation.kid
    )
    expect(switched).toBe(true)
    expect((await verify(server, before.accessToken)).clientId).toBe("partner")
  })

  it("keeps the last good keys when the key file is broken at runtime, and refuses it at start", async () => {
    const dir = tmpDataDir()
    const server = keep(fileRuntime(dir))
    const kid = (await jwksOf(server)).keys[0]!.kid
    const file = path.join(dir, "oauth", "signing-keys.json")
    const stored = JSON.parse(fs.readFileSync(file, "utf8"))
    fs.writeFileSync(file, JSON.stringify({ ...stored, keys: [{ ...stored.keys[0], retired_at: "2026-01-01T00:00:00Z" }] }))
    pastReloadInterval()
    expect((await jwksOf(server)).keys[0]!.kid).toBe(kid)
    const exit = await fileRuntime(dir).runPromiseExit(SigningKeys)
    expect(Exit.isFailure(exit)).toBe(true)
    const shown = JSON.stringify(exit)
    expect(shown).toContain("exactly the first key must be active")
    expect(shown).not.toContain(stored.keys[0].jwk.d)
  })

  it("drops retired keys only after the retention period", async () => {
    const clock = makeFakeClock()
    const r = keep(memoryRuntime({ clock }))
    const keys = await r.runPromise(SigningKeys)
    const first = (await Effect.runPromise(keys.jwks())).keys[0]!.kid
    const run = <A, E>(e: Effect.Effect<A, E>) => r.runPromise(e)
    await run(keys.rotate())
    clock.advance(24 * 3600 * 1000)
    expect((await run(keys.rotate())).removedKids).toEqual([])
    clock.advance(2 * 3600 * 1000)
    const third = await run(keys.rotate())
    expect(third.removedKids).toEqual([first])
    expect(third.publishedKids).not.toContain(first)
  })

  it("uses OAUTH_SIGNING_KEYS: first key signs, every key is published, rotation is refused", async () => {
    const signer = await generateSigningJwk()
    const previous = await generateSigningJwk()
    const { d: _d, ...previousPublic } = previous
    const { kid: _kid, ...signerWithoutKid } = signer
    const env = { OAUTH_SIGNING_KEYS: JSON.stringify({ keys: [signerWithoutKid, previousPublic] }) }
    const dir = tmpDataDir()
    const r = keep(fileRuntime(dir, env))
    const keys = await r.runPromise(SigningKeys)
    expect(keys.origin).toBe("configured")
    const jwks = await Effect.runPromise(keys.jwks())
    expect(jwks.keys.map((k) => k.kid)).toEqual([await thumbprint(signer), previous.kid])
    expect(JSON.stringify(jwks)).not.toContain(signer.d)
    const rotate = await Effect.runPromise(Effect.flip(keys.rotate()))
    expect(rotate._tag).toBe("KeyRotationUnavailable")
    expect(fs.existsSync(path.join(dir, "oauth", "signing-keys.json"))).toBe(false)
  })

  it.each([
    ["not JSON", "{"],
    ["no keys", JSON.stringify({ keys: [] })],
    ["RSA key", JSON.stringify({ keys: [{ kty: "RSA", n: "x", e: "AQAB", d: "y" }] })],
    ["public first", "PUBLIC_FIRST"],
    ["mismatched private part", "MISMATCH"]
  ])("refuses a bad OAUTH_SIGNING_KEYS (%s), naming the variable without echoing key material", async (_, value) => {
    const a: PrivateJwk = await generateSigningJwk()
    const b: PrivateJwk = await generateSigningJwk()
    const text = value === "PUBLIC_FIRST"
      ? JSON.stringify({ keys: [{ kty: "EC", crv: "P-256", x: a.x, y: a.y }] })
      : value === "MISMATCH"
      ? JSON.stringify({ keys: [{ ...a, d: b.d }] })
      : value
    const exit = await fileRuntime(tmpDataDir(), { OAUTH_SIGNING_KEYS: text }).runPromiseExit(SigningKeys)
    expect(Exit.isFailure(exit)).toBe(true)
    const shown = JSON.stringify(exit)
    expect(shown).toContain("OAUTH_SIGNING_KEYS")
    expect(shown).not.toContain(a.d)
    expect(shown).not.toContain(b.d)
  })
})
