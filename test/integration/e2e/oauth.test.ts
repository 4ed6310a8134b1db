/**
 * OAuth against the real process (`node src/main.ts`): oauth4webapi discovers it (RFC 8414), gets a
 * token with special-character credentials (client_secret_basic), jose verifies it against the served
 * JWKS, the token opens the public operations; revocation, key rotation, and a canary secret and
 * token that must never reach the logs.
 */
import { spawnSync } from "node:child_process"
import { Effect } from "effect"
import { createRemoteJWKSet, jwtVerify } from "jose"
import * as oauth from "oauth4webapi"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import { fileRuntime } from "../../support/oauth.ts"
import { childEnv, freePort, type ServiceProcess, spawnService, tempDataDir } from "../../support/spawn.ts"

const insecure = { [oauth.allowInsecureRequests]: true } as const // loopback http only
const SPECIAL_ID = "svc-client_1.a~b:+%& é名"
const CANARY_SECRET = "canary-SECRET-9f1c2e7a-+/=:%&é ü"

let service: ServiceProcess
let dataDir: string
let issuer: URL
let as: oauth.AuthorizationServer

const cli = (...args: Array<string>) => {
  const run = spawnSync(process.execPath, ["src/cli/clients.ts", ...args], { env: { ...childEnv, DATA_DIR: dataDir }, encoding: "utf8" })
  if (run.status !== 0) throw new Error(run.stderr)
  return JSON.parse(run.stdout)
}

const tokenFor = async (clientId: string, secret: string, scope?: string) => {
  const client = { client_id: clientId }
  const response = await oauth.clientCredentialsGrantRequest(as, client, oauth.ClientSecretBasic(secret), scope === undefined ? {} : { scope }, insecure)
  return oauth.processClientCredentialsResponse(as, client, response)
}

beforeAll(async () => {
  dataDir = tempDataDir()
  const port = await freePort()
  issuer = new URL(`http://127.0.0.1:${port}`)
  // Registered before start: the registry API accepts ids that the CLI would never generate.
  const runtime = fileRuntime(dataDir, { PUBLIC_BASE_URL: issuer.origin })
  await runtime.runPromise(Effect.flatMap(ClientRegistry, (r) =>
    r.create({ name: "special", clientId: SPECIAL_ID, secret: CANARY_SECRET, scopes: ["rates:read", "health:read"] })))
  await runtime.dispose()
  service = await spawnService({ PORT: String(port), DATA_DIR: dataDir, PUBLIC_BASE_URL: issuer.origin })
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...insecure, algorithm: "oauth2" }))
})
afterAll(() => service?.stop("SIGKILL"))

describe("OAuth 2.0 client credentials with oauth4webapi and jose", () => {
  it("discovery announces the token endpoint, JWKS and scopes under one issuer", () => {
    expect(as.issuer).toBe(issuer.origin)
    expect(as.token_endpoint).toBe(`${issuer.origin}/oauth/token`)
    expect(as.jwks_uri).toBe(`${issuer.origin}/.well-known/jwks.json`)
    expect(as.scopes_supported).toEqual(["health:read", "rates:read", "subscriptions:write"])
    expect(as.grant_types_supported).toEqual(["client_credentials"])
  })

  let accessToken = ""
  it("issues an RFC 9068 token that jose verifies against the served JWKS", async () => {
    const token = await tokenFor(SPECIAL_ID, CANARY_SECRET, "rates:read")
    expect(token.token_type).toBe("bearer")
    expect(token.expires_in).toBe(900)
    expect(token.scope).toBe("rates:read")
    expect(token.refresh_token).toBeUndefined()
    accessToken = token.access_token
    const { payload, protectedHeader } = await jwtVerify(accessToken, createRemoteJWKSet(new URL(as.jwks_uri!)), {
      issuer: issuer.origin,
      audience: `${issuer.origin}/api`,
      typ: "at+jwt",
      algorithms: ["ES256"],
      requiredClaims: ["iss", "exp", "aud", "sub", "client_id", "iat", "jti", "scope"]
    })
    expect(protectedHeader.kid).toBeTypeOf("string")
    expect(payload).toMatchObject({ sub: SPECIAL_ID, client_id: SPECIAL_ID, scope: "rates:read" })
    expect(payload.exp! - payload.iat!).toBe(900)
  })

  it("the token opens the operation its scope covers, and only that one", async () => {
    const ok = await fetch(`${issuer.origin}/api/v1/exchange-rates`, {
      method: "POST",
      headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
      body: JSON.stringify({ cryptos: [] })
    })
    expect(ok.status).toBe(400) // authorised, then validated
    const other = await fetch(`${issuer.origin}/api/subscribe`, {
      method: "POST",
      headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
      body: JSON.stringify({ email: "a@example.com", locale: "en" })
    })
    expect(other.status).toBe(403)
    expect(other.headers.get("www-authenticate")).toBe(`Bearer realm="api", error="insufficient_scope", scope="subscriptions:write"`)
  })

  it("refuses a wrong secret with 401 and a Basic challenge, as oauth4webapi expects", async () => {
    await expect(tokenFor(SPECIAL_ID, "wrong")).rejects.toBeInstanceOf(oauth.WWWAuthenticateChallengeError)
  })

  /** An operation that checks tokens (health ignores them, C3): 400 once authorised (empty list), 401 if not. */
  const protectedCall = (token: string) =>
    fetch(`${issuer.origin}/api/v1/exchange-rates`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ cryptos: [] })
    })

  it("a rotated signing key keeps live tokens valid", async () => {
    const before = await tokenFor(SPECIAL_ID, CANARY_SECRET, "rates:read")
    cli("rotate-key")
    await new Promise((r) => setTimeout(r, 1_500)) // hot reload
    const after = await tokenFor(SPECIAL_ID, CANARY_SECRET, "rates:read")
    const kid = (t: string) => JSON.parse(Buffer.from(t.split(".")[0]!, "base64url").toString()).kid
    expect(kid(after.access_token)).not.toBe(kid(before.access_token))
    for (const t of [before.access_token, after.access_token]) {
      expect((await protectedCall(t)).status).toBe(400)
    }
    const jwks = await (await fetch(as.jwks_uri!)).json()
    expect(jwks.keys.map((k: { kid: string }) => k.kid)).toEqual(expect.arrayContaining([kid(before.access_token), kid(after.access_token)]))
  })

  it("a client created by the CLI gets tokens; once revoked it gets none and its tokens stop working", async () => {
    const created = cli("create", "--name", "cli", "--scope", "rates:read")
    await new Promise((r) => setTimeout(r, 1_500))
    const token = await tokenFor(created.client_id, created.client_secret)
    cli("revoke", created.client_id)
    await new Promise((r) => setTimeout(r, 1_500))
    await expect(tokenFor(created.client_id, created.client_secret)).rejects.toBeInstanceOf(oauth.WWWAuthenticateChallengeError)
    expect((await protectedCall(token.access_token)).status).toBe(401)
  })

  it("never writes a secret or a token to the logs", async () => {
    const output = service.output()
    expect(output.length).toBeGreaterThan(0)
    expect(output).toMatch(/"path":"\/oauth\/token"/)
    const canaries = [CANARY_SECRET, encodeURIComponent(CANARY_SECRET), Buffer.from(`${SPECIAL_ID}:${CANARY_SECRET}`).toString("base64"), accessToken, accessToken.split(".")[1]!]
    for (const canary of canaries) expect(output).not.toContain(canary)
  })
})
