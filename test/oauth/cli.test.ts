import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Exit, Redacted } from "effect"
import * as jose from "jose"
import { afterAll, describe, expect, it } from "vitest"
import { ClientRegistry } from "../../src/oauth/ClientRegistry.ts"
import { eventually, fileRuntime, tmpDataDir } from "./helpers.ts"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const DATA_DIR = tmpDataDir()

/** Runs the CLI as the operator would, on this Node (24, type stripping), with a clean environment. */
const cli = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const res = spawnSync(process.execPath, ["src/cli/clients.ts", ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", DATA_DIR, ...env },
    encoding: "utf8",
    timeout: 20_000
  })
  return { code: res.status, stdout: res.stdout, stderr: res.stderr }
}

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
      status: "active",
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      rotated_at: null
    })
    expect(res.stdout).not.toContain(secret)
    expect(res.stdout).not.toMatch(/hash|secret|hmac/i)
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

  it.each([
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
  ])("fails with a clear message: %s", (_, args, code, message) => {
    const res = cli(args as Array<string>)
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
