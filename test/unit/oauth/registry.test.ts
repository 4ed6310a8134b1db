import { createHmac } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Exit, Redacted } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import { jwksOf, makeKey } from "../../support/assertionKit.ts"
import { eventually, fileRuntime, memoryRuntime, pastReloadInterval, SPECIAL_ID, SPECIAL_SECRET, tmpDataDir } from "../../support/oauth.ts"

type Runtime = ReturnType<typeof fileRuntime>
const runtimes: Array<Runtime | ReturnType<typeof memoryRuntime>> = []
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((r) => r.dispose()))
})
const open = (dataDir: string, env = {}): Runtime => {
  const r = fileRuntime(dataDir, env)
  runtimes.push(r)
  return r
}
const registry = (r: Runtime) => r.runPromise(ClientRegistry)
const secretOf = (s: string) => Redacted.make(s)
const authOk = async (r: Runtime, id: string, secret: string) =>
  Exit.isSuccess(await r.runPromiseExit(Effect.flatMap(ClientRegistry, (reg) => reg.authenticate(id, secretOf(secret)))))

describe("ClientRegistry (file)", () => {
  it("creates clients with 256-bit secrets, stores only an HMAC keyed with a 0600 pepper", async () => {
    const dir = tmpDataDir()
    const reg = await registry(open(dir))
    const issued = await Effect.runPromise(reg.create({ name: "Partner", scopes: ["rates:read", "health:read"] }))
    const secret = Redacted.value(issued.clientSecret)
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/) // 32 bytes base64url
    expect(Buffer.from(secret, "base64url")).toHaveLength(32)
    expect(issued.client.clientId).toMatch(/^[A-Za-z0-9][A-Za-z0-9_-]{21}$/)
    expect(issued.client.scopes).toEqual(["health:read", "rates:read"])
    expect(issued.client.status).toBe("active")

    const clientsFile = path.join(dir, "oauth", "clients.json")
    const pepperFile = path.join(dir, "oauth", "pepper")
    const text = fs.readFileSync(clientsFile, "utf8")
    expect(text).not.toContain(secret)
    expect(fs.statSync(pepperFile).mode & 0o777).toBe(0o600)
    expect(fs.statSync(clientsFile).mode & 0o777).toBe(0o600)
    // The stored hash is HMAC-SHA-256(pepper, secret), recomputed independently here.
    const pepper = fs.readFileSync(pepperFile, "utf8").trim()
    const expected = createHmac("sha256", Buffer.from(pepper, "utf8")).update(secret, "utf8").digest("base64url")
    const stored = JSON.parse(text).clients[0]
    expect(stored.secret_hash).toBe(`hmac-sha256:${expected}`)
    expect(stored).toMatchObject({ client_id: issued.client.clientId, name: "Partner", status: "active", rotated_at: null })
    // No temp or lock files left behind by the atomic write.
    expect(fs.readdirSync(path.join(dir, "oauth")).sort()).toEqual(["clients.json", "pepper", "signing-keys.json"])
    expect(reg.pepperOrigin).toBe("generated")
  })

  it("lists without hashes or secrets, revokes idempotently, rotates secrets", async () => {
    const dir = tmpDataDir()
    const r = open(dir)
    const reg = await registry(r)
    const a = await Effect.runPromise(reg.create({ name: "A", scopes: ["rates:read"] }))
    const b = await Effect.runPromise(reg.create({ name: "B", scopes: ["subscriptions:write"] }))
    const listed = await Effect.runPromise(reg.list())
    expect(listed.map((c) => c.clientId).sort()).toEqual([a.client.clientId, b.client.clientId].sort())
    for (const c of listed) {
      expect(Object.keys(c).sort()).toEqual(["auth", "clientId", "createdAt", "name", "rotatedAt", "scopes", "status"])
      expect(c.auth).toEqual({ method: "client_secret_basic" })
    }

    const rotated = await Effect.runPromise(reg.rotate(a.client.clientId))
    expect(Redacted.value(rotated.clientSecret)).not.toBe(Redacted.value(a.clientSecret))
    expect(rotated.client.rotatedAt).toMatch(/^\d{4}-\d\d-\d\dT/)
    expect(await authOk(r, a.client.clientId, Redacted.value(a.clientSecret))).toBe(false)
    expect(await authOk(r, a.client.clientId, Redacted.value(rotated.clientSecret))).toBe(true)

    const revoked = await Effect.runPromise(reg.revoke(b.client.clientId))
    expect(revoked.status).toBe("revoked")
    expect((await Effect.runPromise(reg.revoke(b.client.clientId))).status).toBe("revoked")
    const failure = await Effect.runPromise(Effect.flip(reg.authenticate(b.client.clientId, b.clientSecret)))
    expect(failure.reason).toBe("revoked")
    expect((await Effect.runPromise(Effect.flip(reg.rotate(b.client.clientId))))._tag).toBe("ClientRevoked")
    expect((await Effect.runPromise(Effect.flip(reg.revoke("nope"))))._tag).toBe("ClientNotFound")
    expect((await Effect.runPromise(Effect.flip(reg.rotate("nope"))))._tag).toBe("ClientNotFound")
  })

  it("accepts ids and secrets with -._~:+%& spaces and non-ASCII, and they survive a restart", async () => {
    const dir = tmpDataDir()
    const reg = await registry(open(dir))
    await Effect.runPromise(reg.create({ name: "Special", scopes: ["rates:read"], clientId: SPECIAL_ID, secret: SPECIAL_SECRET }))
    const restarted = open(dir)
    expect(await authOk(restarted, SPECIAL_ID, SPECIAL_SECRET)).toBe(true)
    expect(await authOk(restarted, SPECIAL_ID, SPECIAL_SECRET.normalize("NFD"))).toBe(false)
    expect(await authOk(restarted, SPECIAL_ID, SPECIAL_SECRET + " ")).toBe(false)
    const duplicate = await Effect.runPromise(Effect.flip(reg.create({ name: "x", scopes: ["rates:read"], clientId: SPECIAL_ID })))
    expect(duplicate._tag).toBe("InvalidClientInput")
  })

  it("rejects bad input with InvalidClientInput naming the field", async () => {
    const reg = await registry(open(tmpDataDir()))
    const bad = async (input: Parameters<typeof reg.create>[0]) => {
      const e = await Effect.runPromise(Effect.flip(reg.create(input)))
      return e._tag === "InvalidClientInput" ? e.field : e._tag
    }
    expect(await bad({ name: " ", scopes: ["rates:read"] })).toBe("name")
    expect(await bad({ name: "x\u0007y", scopes: ["rates:read"] })).toBe("name")
    expect(await bad({ name: "n".repeat(201), scopes: ["rates:read"] })).toBe("name")
    expect(await bad({ name: "x", scopes: [] })).toBe("scope")
    expect(await bad({ name: "x", scopes: ["rates:write"] })).toBe("scope")
    expect(await bad({ name: "x", scopes: ["Rates:read"] })).toBe("scope")
    expect(await bad({ name: "x", scopes: ["rates:read"], clientId: "" })).toBe("client_id")
    expect(await bad({ name: "x", scopes: ["rates:read"], clientId: "a\u0000b" })).toBe("client_id")
    expect(await bad({ name: "x", scopes: ["rates:read"], secret: "" })).toBe("client_secret")
  })

  it("hot-reloads changes made by another process (the CLI) without restart", async () => {
    const dir = tmpDataDir()
    const server = open(dir)
    await registry(server) // started before the client exists
    const cli = await registry(open(dir))
    const issued = await Effect.runPromise(cli.create({ name: "Later", scopes: ["rates:read"] }))
    const secret = Redacted.value(issued.clientSecret)
    const started = Date.now()
    expect(await eventually(() => authOk(server, issued.client.clientId, secret))).toBe(true)
    expect(Date.now() - started).toBeLessThan(2500)

    await Effect.runPromise(cli.revoke(issued.client.clientId))
    expect(await eventually(async () => !(await authOk(server, issued.client.clientId, secret)))).toBe(true)
  })

  it("keeps the last good state when the file is broken at runtime, and refuses a broken file at start", async () => {
    const dir = tmpDataDir()
    const server = open(dir)
    const reg = await registry(server)
    const issued = await Effect.runPromise(reg.create({ name: "A", scopes: ["rates:read"] }))
    const file = path.join(dir, "oauth", "clients.json")
    fs.writeFileSync(file, "{ not json")
    pastReloadInterval()
    expect(await authOk(server, issued.client.clientId, Redacted.value(issued.clientSecret))).toBe(true)

    const exit = await fileRuntime(dir).runPromiseExit(ClientRegistry)
    expect(Exit.isFailure(exit)).toBe(true)
    expect(JSON.stringify(exit)).toContain("not valid JSON")
  })

  it("refuses a registry that does not match its format at start, naming the member", async () => {
    const dir = tmpDataDir()
    const reg = await registry(open(dir))
    await Effect.runPromise(reg.create({ name: "A", scopes: ["rates:read"] }))
    const file = path.join(dir, "oauth", "clients.json")
    const stored = JSON.parse(fs.readFileSync(file, "utf8"))
    const broken = [
      [{ ...stored, clients: [{ ...stored.clients[0], scopes: ["rates:write"] }] }, "clients[0].scopes[0]"],
      [{ ...stored, clients: [{ ...stored.clients[0], secret_hash: "plain" }] }, "clients[0].secret_hash"],
      [{ ...stored, clients: [stored.clients[0], stored.clients[0]] }, "clients[1].client_id: a duplicate client id"],
      [{ ...stored, version: 2 }, "version"]
    ] as const
    for (const [content, expected] of broken) {
      fs.writeFileSync(file, JSON.stringify(content))
      const exit = await fileRuntime(dir).runPromiseExit(ClientRegistry)
      expect(Exit.isFailure(exit)).toBe(true)
      expect(JSON.stringify(exit)).toContain(expected)
    }
  })

  it("refuses a registry hashed with a different pepper, naming the cause", async () => {
    const dir = tmpDataDir()
    const reg = await registry(open(dir))
    await Effect.runPromise(reg.create({ name: "A", scopes: ["rates:read"] }))
    const exit = await fileRuntime(dir, { OAUTH_SECRET_PEPPER: "x".repeat(40) }).runPromiseExit(ClientRegistry)
    expect(Exit.isFailure(exit)).toBe(true)
    expect(JSON.stringify(exit)).toContain("different secret pepper")
  })

  it("uses OAUTH_SECRET_PEPPER when configured and writes no pepper file", async () => {
    const dir = tmpDataDir()
    const pepper = "p".repeat(32) + "-configured"
    const reg = await registry(open(dir, { OAUTH_SECRET_PEPPER: pepper }))
    expect(reg.pepperOrigin).toBe("configured")
    const issued = await Effect.runPromise(reg.create({ name: "A", scopes: ["rates:read"] }))
    expect(fs.existsSync(path.join(dir, "oauth", "pepper"))).toBe(false)
    const stored = JSON.parse(fs.readFileSync(path.join(dir, "oauth", "clients.json"), "utf8")).clients[0]
    const expected = createHmac("sha256", pepper).update(Redacted.value(issued.clientSecret)).digest("base64url")
    expect(stored.secret_hash).toBe(`hmac-sha256:${expected}`)
  })

  it("honours OAUTH_CLIENTS_FILE", async () => {
    const dir = tmpDataDir()
    const file = path.join(dir, "elsewhere", "registry.json")
    const reg = await registry(open(dir, { OAUTH_CLIENTS_FILE: file }))
    await Effect.runPromise(reg.create({ name: "A", scopes: ["rates:read"] }))
    expect(JSON.parse(fs.readFileSync(file, "utf8")).clients).toHaveLength(1)
  })

  it("serialises concurrent writers from two processes-worth of instances (no lost update)", async () => {
    const dir = tmpDataDir()
    const one = await registry(open(dir))
    const two = await registry(open(dir))
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => [
        Effect.runPromise(one.create({ name: `one-${i}`, scopes: ["rates:read"] })),
        Effect.runPromise(two.create({ name: `two-${i}`, scopes: ["rates:read"] }))
      ]).flat()
    )
    expect(await Effect.runPromise(one.list())).toHaveLength(20)
    expect(fs.readdirSync(path.join(dir, "oauth")).sort()).toEqual(["clients.json", "pepper", "signing-keys.json"])
  })
})

describe("ClientRegistry: private_key_jwt clients (issue 34)", () => {
  it("stores a key client's public keys (no secret, no hash), reloads them, and never authenticates it by secret", async () => {
    const dir = tmpDataDir()
    const key = await makeKey("ES256", "k1")
    const reg = await registry(open(dir))
    const client = await Effect.runPromise(reg.createWithKeys({ name: "Keyed", scopes: ["rates:read"], keys: { jwks: jwksOf(key) } }))
    expect(client.auth).toEqual({ method: "private_key_jwt", keys: { _tag: "Inline", jwks: { keys: [{ ...key.publicJwk }] } } })
    const stored = JSON.parse(fs.readFileSync(path.join(dir, "oauth", "clients.json"), "utf8")).clients[0]
    expect(stored.token_endpoint_auth_method).toBe("private_key_jwt")
    expect(stored.secret_hash).toBeUndefined()
    const failure = await Effect.runPromise(Effect.flip(reg.authenticate(client.clientId, secretOf(""))))
    expect(failure.reason).toBe("wrong_method")
    // A restart reads the same keys.
    const again = await registry(open(dir))
    expect((await Effect.runPromise(again.get(client.clientId)))?.auth).toEqual(client.auth)
  })

  it("a registry written before private_key_jwt (no method member) holds secret clients", async () => {
    const dir = tmpDataDir()
    const reg = await registry(open(dir))
    const issued = await Effect.runPromise(reg.create({ name: "Old", scopes: ["rates:read"] }))
    const file = JSON.parse(fs.readFileSync(path.join(dir, "oauth", "clients.json"), "utf8"))
    expect(Object.keys(file.clients[0]).sort()).toEqual(["client_id", "created_at", "name", "rotated_at", "scopes", "secret_hash", "status"])
    expect(await authOk(open(dir), issued.client.clientId, Redacted.value(issued.clientSecret))).toBe(true)
  })

  it("refuses a key client record with a secret hash, or with both jwks and jwks_uri", async () => {
    const dir = tmpDataDir()
    const reg = await registry(open(dir))
    await Effect.runPromise(reg.createWithKeys({ name: "K", scopes: ["rates:read"], keys: { jwksUri: "https://keys.example/jwks" } }))
    const issued = await Effect.runPromise(reg.create({ name: "S", scopes: ["rates:read"] }))
    const file = path.join(dir, "oauth", "clients.json")
    const stored = JSON.parse(fs.readFileSync(file, "utf8"))
    const [keyed, secret] = stored.clients
    for (const content of [
      { ...stored, clients: [{ ...keyed, secret_hash: secret.secret_hash }, secret] },
      { ...stored, clients: [{ ...keyed, jwks: { keys: [(await makeKey("ES256")).publicJwk] } }, secret] },
      { ...stored, clients: [keyed, { ...secret, token_endpoint_auth_method: "private_key_jwt" }] }
    ]) {
      fs.writeFileSync(file, JSON.stringify(content))
      const exit = await fileRuntime(dir).runPromiseExit(ClientRegistry)
      expect(JSON.stringify(exit)).toContain("private_key_jwt client has either jwks or jwks_uri")
    }
    expect(issued.client.auth.method).toBe("client_secret_basic")
  })

  it("replaces a key client's keys; refuses a secret rotation for it, and new keys for a secret client", async () => {
    const reg = await registry(open(tmpDataDir()))
    const client = await Effect.runPromise(reg.createWithKeys({ name: "K", scopes: ["rates:read"], keys: { jwks: jwksOf(await makeKey("ES256")) } }))
    const replaced = await Effect.runPromise(reg.replaceKeys(client.clientId, { jwksUri: "https://keys.example/jwks" }))
    expect(replaced.auth).toEqual({ method: "private_key_jwt", keys: { _tag: "Uri", uri: "https://keys.example/jwks" } })
    const rotation = await Effect.runPromise(Effect.flip(reg.rotate(client.clientId)))
    expect(rotation).toMatchObject({ _tag: "InvalidClientInput", field: "client_id" })
    const secret = await Effect.runPromise(reg.create({ name: "S", scopes: ["rates:read"] }))
    const keys = await Effect.runPromise(Effect.flip(reg.replaceKeys(secret.client.clientId, { jwksUri: "https://keys.example/jwks" })))
    expect(keys).toMatchObject({ _tag: "InvalidClientInput" })
  })

  it.each([
    ["no keys", { jwks: { keys: [] } }, "expected 1 to 20 keys"],
    ["not a JWKS", { jwks: [1, 2] }, "expected a JWK Set"],
    ["a symmetric key", { jwks: { keys: [{ kty: "oct", k: "c2VjcmV0" }] } }, "private or symmetric"],
    ["an RSA key of 1024 bits", { jwks: { keys: [{ kty: "RSA", n: Buffer.alloc(128, 0xff).toString("base64url"), e: "AQAB" }] } }, "fewer than 2048 bits"],
    ["a P-384 key", { jwks: { keys: [{ kty: "EC", crv: "P-384", x: "AA", y: "AA" }] } }, "must be a public signing key"],
    ["an EC point off the curve", { jwks: { keys: [{ kty: "EC", crv: "P-256", x: Buffer.alloc(32, 1).toString("base64url"), y: Buffer.alloc(32, 2).toString("base64url") }] } }, "not a valid EC public key"],
    ["an encryption key", { jwks: { keys: [{ kty: "OKP", crv: "Ed25519", x: "AA", use: "enc" }] } }, "must be a public signing key"],
    ["a jwks_uri with credentials", { jwksUri: "https://user:pw@keys.example/jwks" }, "credentials"],
    ["a jwks_uri that is not http(s)", { jwksUri: "file:///etc/passwd" }, "https"]
  ])("refuses %s", async (_, keys, reason) => {
    const reg = await registry(open(tmpDataDir()))
    const failure = await Effect.runPromise(Effect.flip(reg.createWithKeys({ name: "K", scopes: ["rates:read"], keys })))
    expect(failure._tag).toBe("InvalidClientInput")
    expect(failure.message).toContain(reason)
  })

  it("refuses two keys with one kid", async () => {
    const reg = await registry(open(tmpDataDir()))
    const [a, b] = [await makeKey("ES256", "same"), await makeKey("RS256", "same")]
    const failure = await Effect.runPromise(Effect.flip(reg.createWithKeys({ name: "K", scopes: ["rates:read"], keys: { jwks: jwksOf(a, b) } })))
    expect(failure.message).toContain("repeats the kid")
  })
})

describe("ClientRegistry (memory)", () => {
  it("authenticates clients given up front, including special characters", async () => {
    const r = memoryRuntime({ clients: [{ name: "S", scopes: ["rates:read"], clientId: SPECIAL_ID, secret: SPECIAL_SECRET }] })
    runtimes.push(r)
    const reg = await r.runPromise(ClientRegistry)
    expect(reg.pepperOrigin).toBe("memory")
    const ok = await Effect.runPromise(reg.authenticate(SPECIAL_ID, secretOf(SPECIAL_SECRET)))
    expect(ok.clientId).toBe(SPECIAL_ID)
    expect((await Effect.runPromise(Effect.flip(reg.authenticate("other", secretOf(SPECIAL_SECRET))))).reason).toBe("unknown_client")
    expect((await Effect.runPromise(Effect.flip(reg.authenticate(SPECIAL_ID, secretOf("nope"))))).reason).toBe("wrong_secret")
  })
})
