/**
 * End to end with a real OAuth client library: oauth4webapi discovers the server (RFC 8414), gets a token
 * with client_secret_basic and special-character credentials, and validates it as a resource server
 * (RFC 9068 validateJwtAccessToken). The tiny node:http server binds only the framework-independent core,
 * exactly as the HttpApi routes do.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"
import * as oauth from "oauth4webapi"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BearerAuth, challengeFor } from "../../../src/oauth/BearerAuth.ts"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import { discoveryDocument } from "../../../src/oauth/discovery.ts"
import { SigningKeys } from "../../../src/oauth/SigningKeys.ts"
import { TokenEndpoint } from "../../../src/oauth/TokenEndpoint.ts"
import { fileRuntime, SPECIAL_ID, SPECIAL_SECRET, tmpDataDir } from "../../support/oauth.ts"

const insecure = { [oauth.allowInsecureRequests]: true } as const // loopback http only

let server: http.Server
let runtime: ReturnType<typeof fileRuntime>
let issuer: URL
let as: oauth.AuthorizationServer
let issuerText = ""

const readBody = (req: http.IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

const route = async (req: http.IncomingMessage, res: http.ServerResponse) => {
  const send = (status: number, headers: Record<string, string>, body: string) => {
    res.writeHead(status, headers)
    res.end(body)
  }
  const url = new URL(req.url ?? "/", issuer)
  if (req.method === "POST" && url.pathname === "/oauth/token") {
    const answer = await runtime.runPromise(Effect.flatMap(TokenEndpoint, (e) =>
      Effect.promise(() => readBody(req)).pipe(Effect.flatMap((body) =>
        e.handle({
          authorization: req.headers.authorization,
          contentType: req.headers["content-type"],
          body,
          clientIp: req.socket.remoteAddress ?? "unknown"
        })
      ))))
    return send(answer.status, { ...answer.headers }, answer.body)
  }
  if (req.method === "GET" && url.pathname === "/.well-known/oauth-authorization-server") {
    return send(200, { "content-type": "application/json" }, JSON.stringify(discoveryDocument({ publicBaseUrl: issuerText })))
  }
  if (req.method === "GET" && url.pathname === "/.well-known/jwks.json") {
    const jwks = await runtime.runPromise(Effect.flatMap(SigningKeys, (k) => k.jwks()))
    return send(200, { "content-type": "application/json" }, JSON.stringify(jwks))
  }
  if (req.method === "GET" && url.pathname === "/api/rates") {
    const result = await runtime.runPromise(Effect.flatMap(BearerAuth, (b) =>
      Effect.result(b.authenticate(req.headers.authorization, "rates:read"))))
    if (result._tag === "Success") {
      const who = result.success._tag === "Anonymous" ? "anonymous" : result.success.principal.clientId
      return send(200, { "content-type": "application/json" }, JSON.stringify({ who }))
    }
    const status = result.failure._tag === "InvalidToken" ? 401 : 403
    return send(status, { "content-type": "application/problem+json", "www-authenticate": challengeFor(result.failure) }, "{}")
  }
  send(404, { "content-type": "text/plain" }, "not found")
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    route(req, res).catch(() => {
      res.writeHead(500)
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  issuerText = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  issuer = new URL(issuerText)
  runtime = fileRuntime(tmpDataDir(), { PUBLIC_BASE_URL: issuerText })
  await runtime.runPromise(Effect.flatMap(ClientRegistry, (r) =>
    Effect.all([
      r.create({ name: "Special", scopes: ["rates:read", "health:read"], clientId: SPECIAL_ID, secret: SPECIAL_SECRET }),
      r.create({ name: "Health", scopes: ["health:read"], clientId: "health-only", secret: "health-secret" })
    ])))
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...insecure, algorithm: "oauth2" }))
})

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()))
  await runtime?.dispose()
})

const grant = (clientId: string, secret: string, scope?: string) =>
  oauth.clientCredentialsGrantRequest(
    as,
    { client_id: clientId },
    oauth.ClientSecretBasic(secret),
    scope === undefined ? {} : { scope },
    insecure
  )

describe("oauth4webapi against the OAuth core", () => {
  it("discovers the server with the RFC 8414 oauth2 algorithm", () => {
    expect(as.issuer).toBe(issuerText)
    expect(as.token_endpoint).toBe(`${issuerText}/oauth/token`)
    expect(as.jwks_uri).toBe(`${issuerText}/.well-known/jwks.json`)
    expect(as.grant_types_supported).toEqual(["client_credentials"])
  })

  it("gets a token with client_secret_basic and special-character credentials, and validates it as an RS", async () => {
    const response = await grant(SPECIAL_ID, SPECIAL_SECRET, "rates:read")
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(response.headers.get("pragma")).toBe("no-cache")
    const token = await oauth.processClientCredentialsResponse(as, { client_id: SPECIAL_ID }, response)
    expect(token.token_type).toBe("bearer")
    expect(token.expires_in).toBe(900)
    expect(token.scope).toBe("rates:read")
    expect(token.refresh_token).toBeUndefined()

    const request = new Request(`${issuerText}/api/rates`, { headers: { authorization: `Bearer ${token.access_token}` } })
    const claims = await oauth.validateJwtAccessToken(as, request, `${issuerText}/api`, insecure)
    expect(claims.client_id).toBe(SPECIAL_ID)
    expect(claims.sub).toBe(SPECIAL_ID)
    expect(claims.iss).toBe(issuerText)
    expect(claims.scope).toBe("rates:read")

    const api = await fetch(request)
    expect(await api.json()).toEqual({ who: SPECIAL_ID })
  })

  it("gets all of the client's scopes when none is requested", async () => {
    const token = await oauth.processClientCredentialsResponse(as, { client_id: SPECIAL_ID }, await grant(SPECIAL_ID, SPECIAL_SECRET))
    expect(token.scope).toBe("health:read rates:read")
  })

  it("surfaces a wrong secret as a 401 Basic challenge", async () => {
    const error = await oauth.processClientCredentialsResponse(as, { client_id: SPECIAL_ID }, await grant(SPECIAL_ID, "wrong"))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(oauth.WWWAuthenticateChallengeError)
    const challenge = error as oauth.WWWAuthenticateChallengeError
    expect(challenge.status).toBe(401)
    expect(challenge.cause[0]).toMatchObject({ scheme: "basic", parameters: { realm: "oauth", error: "invalid_client" } })
  })

  it("surfaces a scope the client may not have as invalid_scope (application/json error body)", async () => {
    const error = await oauth.processClientCredentialsResponse(as, { client_id: "health-only" }, await grant("health-only", "health-secret", "rates:read"))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(oauth.ResponseBodyError)
    const body = error as oauth.ResponseBodyError
    expect(body.error).toBe("invalid_scope")
    expect(body.status).toBe(400)
    expect(body.cause).toMatchObject({ code: "invalid_scope", status: 400, type: `${issuerText}/problems/invalid_scope` })
  })

  it("keeps tokens signed before a key rotation valid for the resource server", async () => {
    const before = await oauth.processClientCredentialsResponse(as, { client_id: SPECIAL_ID }, await grant(SPECIAL_ID, SPECIAL_SECRET, "rates:read"))
    await runtime.runPromise(Effect.flatMap(SigningKeys, (k) => k.rotate()))
    const after = await oauth.processClientCredentialsResponse(as, { client_id: SPECIAL_ID }, await grant(SPECIAL_ID, SPECIAL_SECRET, "rates:read"))
    for (const t of [before, after]) {
      const request = new Request(`${issuerText}/api/rates`, { headers: { authorization: `Bearer ${t.access_token}` } })
      // A fresh AS object: no cached JWKS, so the rotated set is fetched.
      const fresh = { ...as }
      expect((await oauth.validateJwtAccessToken(fresh, request, `${issuerText}/api`, insecure)).client_id).toBe(SPECIAL_ID)
      expect((await (await fetch(request)).json())).toEqual({ who: SPECIAL_ID })
    }
  })

  it("the resource route answers 401/403 with the Bearer challenges", async () => {
    const bad = await fetch(`${issuerText}/api/rates`, { headers: { authorization: "Bearer not-a-token" } })
    expect(bad.status).toBe(401)
    expect(bad.headers.get("www-authenticate")).toBe('Bearer realm="api", error="invalid_token"')

    const healthToken = await oauth.processClientCredentialsResponse(as, { client_id: "health-only" }, await grant("health-only", "health-secret"))
    const forbidden = await fetch(`${issuerText}/api/rates`, { headers: { authorization: `Bearer ${healthToken.access_token}` } })
    expect(forbidden.status).toBe(403)
    expect(forbidden.headers.get("www-authenticate")).toBe('Bearer realm="api", error="insufficient_scope", scope="rates:read"')

    const anonymous = await fetch(`${issuerText}/api/rates`)
    expect(await anonymous.json()).toEqual({ who: "anonymous" })
  })

  it("a revoked client cannot get a token", async () => {
    await runtime.runPromise(Effect.flatMap(ClientRegistry, (r) => r.revoke("health-only")))
    const error = await oauth.processClientCredentialsResponse(as, { client_id: "health-only" }, await grant("health-only", "health-secret"))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(oauth.WWWAuthenticateChallengeError)
    expect((error as oauth.WWWAuthenticateChallengeError).status).toBe(401)
  })
})
