import { execFile, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Exit, Redacted } from "effect"
import * as jose from "jose"
import { afterAll, describe, expect, it } from "vitest"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import { TokenEndpoint } from "../../../src/oauth/TokenEndpoint.ts"
import { assertionFor, assertionForm, type ClientKey, jwksOf, makeKey, serveJwks } from "../../support/assertionKit.ts"
import { eventually, FORM, fileRuntime, tmpDataDir } from "../../support/oauth.ts"
import { childEnv } from "../../support/spawn.ts"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..")
const DATA_DIR = tmpDataDir()

/** Runs the CLI as the operator would, on this Node (24, type stripping), with a clean environment. */
const cli = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const res = spawnSync(process.execPath, ["src/cli/clients.ts", ...args], {
    cwd: ROOT,
    env: { ...childEnv, DATA_DIR, ...env },
    encoding: "utf8",
    timeout: 20_000
  })
  return { code: res.status, stdout: res.stdout, stderr: res.stderr }
}

const cliAsync = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, ["src/cli/clients.ts", ...args], {
      cwd: ROOT,
      env: { ...childEnv, DATA_DIR },
      encoding: "utf8",
      timeout: 20_000
    }, (error, stdout, stderr) => resolve({ code: error === null ? 0 : (typeof error.code === "number" ? error.code : null), stdout, stderr }))
  })

// A "server" running on the same DATA_DIR while the CLI edits it.
const server = fileRuntime(DATA_DIR)
afterAll(() => server.dispose())
const serverAccepts = async (id: string, secret: string) =>
  Exit.isSuccess(await server.runPromiseExit(Effect.flatMap(ClientRegistry, (r) => r.authenticate(id, Redacted.make(secret)))))

const CREDENTIALS = /^\{"client_id": "([A-Za-z0-9_-]{22})", "client_secret": "([A-Za-z0-9_-]{43})"\}\n$/

describe("src/cli/clients.ts", () => {
  let clientId = ""
  let secret = ""

  it("create prints exactly {\"client_id\": ..., \"client_secret\": ...} and the running server accepts it", async () => {
    await server.runPromise(ClientRegistry) // the server is up before the client exists
    const res = cli(["create", "--name", "Partner A", "--scope", "rates:read health:read"])
    expect(res.code).toBe(0)
    const match = CREDENTIALS.exec(res.stdout)
    expect(match).not.toBeNull()
    clientId = match![1]!
    secret = match![2]!
    expect(Object.keys(JSON.parse(res.stdout))).toEqual(["client_id", "client_secret"])
    expect(res.stderr).not.toContain(secret)
    expect(fs.readFileSync(path.join(DATA_DIR, "oauth", "clients.json"), "utf8")).not.toContain(secret)
    expect(await eventually(() => serverAccepts(clientId, secret))).toBe(true)
  })

  it("create accepts --opt=value and repeated --scope", () => {
    const res = cli(["create", "--name=Second", "--scope=rates:read", "--scope", "subscriptions:write"])
    expect(res.code).toBe(0)
    expect(res.stdout).toMatch(CREDENTIALS)
  })

  it("list shows clients without hashes or secrets", () => {
    const res = cli(["list"])
    expect(res.code).toBe(0)
    const listed = JSON.parse(res.stdout) as Array<Record<string, unknown>>
    expect(listed.find((c) => c.client_id === clientId)).toEqual({
      client_id: clientId,
      name: "Partner A",
      scopes: ["health:read", "rates:read"],
      token_endpoint_auth_method: "client_secret_basic",
      status: "active",
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      rotated_at: null
    })
    expect(res.stdout).not.toContain(secret)
    // The method's RFC 7591 name is the one place the word may appear.
    expect(res.stdout.replaceAll('"client_secret_basic"', "")).not.toMatch(/hash|secret|hmac/i)
  })

  it("rotate prints a new secret; the old one stops working", async () => {
    const res = cli(["rotate", clientId])
    expect(res.code).toBe(0)
    const match = CREDENTIALS.exec(res.stdout)
    expect(match![1]).toBe(clientId)
    const fresh = match![2]!
    expect(fresh).not.toBe(secret)
    expect(await eventually(() => serverAccepts(clientId, fresh))).toBe(true)
    expect(await serverAccepts(clientId, secret)).toBe(false)
    secret = fresh
  })

  it("revoke marks the client revoked; the server refuses it; rotate is then refused", async () => {
    const res = cli(["revoke", clientId])
    expect(res.code).toBe(0)
    expect(JSON.parse(res.stdout)).toEqual({ client_id: clientId, status: "revoked" })
    expect(await eventually(async () => !(await serverAccepts(clientId, secret)))).toBe(true)
    const again = cli(["rotate", clientId])
    expect(again.code).toBe(1)
    expect(again.stdout).toBe("")
    expect(again.stderr).toContain("revoked")
  })

  // Each refusal its own process, independent of the others: side by side (one after another took 17 s).
  it.concurrent.each([
    ["no command", [], 2, "missing command"],
    ["unknown command", ["frobnicate"], 2, "unknown command"],
    ["unknown scope", ["create", "--name", "X", "--scope", "rates:write"], 2, "unknown scope"],
    ["missing --scope", ["create", "--name", "X"], 2, "--scope"],
    ["missing --name", ["create", "--scope", "rates:read"], 2, "--name"],
    ["empty name", ["create", "--name", " ", "--scope", "rates:read"], 2, "name"],
    ["option without value", ["create", "--name"], 2, "needs a value"],
    ["unknown option", ["create", "--nme", "X", "--scope", "rates:read"], 2, "unknown option"],
    ["revoke without id", ["revoke"], 2, "exactly one client id"],
    ["revoke unknown id", ["revoke", "nope"], 1, "no client with id"],
    ["rotate unknown id", ["rotate", "nope"], 1, "no client with id"]
  ])("fails with a clear message: %s", async (_, args, code, message) => {
    const res = await cliAsync(args as Array<string>)
    expect(res.code).toBe(code)
    expect(res.stdout).toBe("")
    expect(res.stderr).toContain(message)
  })

  it("rotate-key adds a signing key and keeps the old one published", () => {
    const dir = tmpDataDir()
    const first = cli(["rotate-key"], { DATA_DIR: dir })
    expect(first.code).toBe(0)
    const rotation = JSON.parse(first.stdout) as { kid: string; published_kids: Array<string>; removed_kids: Array<string> }
    expect(rotation.published_kids).toHaveLength(2) // the key created on first use, plus the new one
    expect(rotation.published_kids[0]).toBe(rotation.kid)
    const file = path.join(dir, "oauth", "signing-keys.json")
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    expect(first.stdout).not.toContain('"d"')
  })

  it("generate-key prints a private JWKS usable as OAUTH_SIGNING_KEYS; rotate-key then prints its next value", async () => {
    const generated = cli(["generate-key"])
    expect(generated.code).toBe(0)
    const jwks = JSON.parse(generated.stdout) as { keys: Array<Record<string, string>> }
    const key = jwks.keys[0]!
    expect(key).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" })
    expect(key.kid).toBe(await jose.calculateJwkThumbprint({ kty: "EC", crv: "P-256", x: key.x!, y: key.y! }))

    const next = cli(["rotate-key"], { OAUTH_SIGNING_KEYS: generated.stdout.trim(), DATA_DIR: tmpDataDir() })
    expect(next.code).toBe(0)
    expect(next.stderr).toContain("OAUTH_SIGNING_KEYS")
    const nextJwks = JSON.parse(next.stdout) as { keys: Array<Record<string, string>> }
    expect(nextJwks.keys).toHaveLength(2)
    expect(nextJwks.keys[0]!.d).toBeTypeOf("string")
    expect(nextJwks.keys[1]).toEqual({ kty: "EC", crv: "P-256", x: key.x, y: key.y, kid: key.kid, alg: "ES256", use: "sig" })
  })

  it("reports a bad configuration variable by name", () => {
    const res = cli(["list"], { OAUTH_SECRET_PEPPER: "short" })
    expect(res.code).toBe(1)
    expect(res.stderr).toContain("OAUTH_SECRET_PEPPER")
  })
})

describe("src/cli/clients.ts: private_key_jwt clients (issue 34)", () => {
  const token = (clientId: string, key: ClientKey) =>
    Effect.promise(() => assertionFor(key, clientId, { nowMs: Date.now(), audience: "https://api.example.test" })).pipe(
      Effect.flatMap((assertion) =>
        Effect.flatMap(TokenEndpoint, (endpoint) =>
          endpoint.handle({ authorization: undefined, contentType: FORM, body: assertionForm(assertion), clientIp: "192.0.2.1" }))),
      Effect.map((res) => res.status),
      (effect) => server.runPromise(effect)
    )
  const jwksFile = (jwks: unknown) => {
    const file = path.join(tmpDataDir(), "jwks.json")
    fs.writeFileSync(file, JSON.stringify(jwks))
    return file
  }
  let clientId = ""
  let ec: ClientKey
  let rsa: ClientKey

  it("create --jwks-file registers a key client, shows its key ids (a thumbprint for a key without kid), and the server accepts it", async () => {
    ;[ec, rsa] = [await makeKey("ES256", "ec-1"), await makeKey("RS256")]
    const { kid: _, ...rsaWithoutKid } = rsa.publicJwk
    const res = cli(["create", "--name", "Keyed", "--scope", "rates:read", "--jwks-file", jwksFile({ keys: [ec.publicJwk, rsaWithoutKid] })])
    expect(res.code).toBe(0)
    const created = JSON.parse(res.stdout)
    clientId = created.client_id
    const thumbprint = await jose.calculateJwkThumbprint(rsaWithoutKid)
    expect(created).toEqual({ client_id: clientId, token_endpoint_auth_method: "private_key_jwt", kids: ["ec-1", thumbprint] })
    expect(await eventually(async () => (await token(clientId, ec)) === 200)).toBe(true)
    expect(await token(clientId, { ...rsa, kid: thumbprint })).toBe(200)
  })

  it("create --jwks-uri fetches the published keys first and shows their ids; list shows each client's method", async () => {
    const published = await serveJwks(jwksOf(rsa))
    try {
      // Not spawnSync: this process serves the jwks_uri meanwhile.
      const res = await cliAsync(["create", "--name", "By URI", "--scope", "rates:read", "--auth-method", "private_key_jwt", "--jwks-uri", published.url])
      expect(res.code).toBe(0)
      const created = JSON.parse(res.stdout)
      expect(created).toMatchObject({ token_endpoint_auth_method: "private_key_jwt", jwks_uri: published.url, kids: [rsa.kid] })
      const listed = JSON.parse(cli(["list"]).stdout) as Array<Record<string, unknown>>
      expect(listed.find((c) => c.client_id === created.client_id)).toMatchObject({ token_endpoint_auth_method: "private_key_jwt", jwks_uri: published.url })
      expect(listed.find((c) => c.client_id === clientId)).toMatchObject({ token_endpoint_auth_method: "private_key_jwt", kids: ["ec-1", expect.any(String)] })
    } finally {
      await published.close()
    }
  })

  it("rotate ID --jwks-file replaces the keys: the old key stops working, the new one works", async () => {
    const fresh = await makeKey("EdDSA", "ed-2")
    const res = cli(["rotate", clientId, "--jwks-file", jwksFile(jwksOf(fresh))])
    expect(res.code).toBe(0)
    expect(JSON.parse(res.stdout)).toEqual({ client_id: clientId, token_endpoint_auth_method: "private_key_jwt", kids: ["ed-2"] })
    expect(await eventually(async () => (await token(clientId, fresh)) === 200)).toBe(true)
    expect(await token(clientId, ec)).toBe(401)
  })

  it.concurrent.each([
    ["a private key in the JWKS", () => ["--jwks-file", jwksFile({ keys: [{ kty: "EC", crv: "P-256", x: "AA", y: "AA", d: "AA" }] })], 2, "private"],
    ["both --jwks-file and --jwks-uri", () => ["--jwks-file", jwksFile(jwksOf(ec)), "--jwks-uri", "https://example.test/jwks"], 2, "one of --jwks-file and --jwks-uri"],
    ["--auth-method client_secret_basic with keys", () => ["--auth-method", "client_secret_basic", "--jwks-file", jwksFile(jwksOf(ec))], 2, "--auth-method"],
    ["a jwks_uri that cannot be fetched", () => ["--jwks-uri", "http://127.0.0.1:9/jwks.json"], 1, "nothing was registered"]
  ])("create refuses %s", async (_, extra, code, message) => {
    const res = await cliAsync(["create", "--name", "Refused", "--scope", "rates:read", ...extra()])
    expect(res.code).toBe(code)
    expect(res.stdout).toBe("")
    expect(res.stderr).toContain(message)
  })

  it("none of the refused creations registered anything", () => {
    expect(cli(["list"]).stdout).not.toContain("Refused")
  })
})
