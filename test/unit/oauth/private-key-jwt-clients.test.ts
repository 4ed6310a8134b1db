/**
 * Issue 34, done when: oauth4webapi's and openid-client's `PrivateKeyJwt` get a token from the running
 * service (over HTTP, the real server) for ES256, RS256, PS256 and EdDSA keys, registered inline and by
 * `jwks_uri`, and the token works on the protected operations as a secret client's does (200 with its
 * scope, 403 without it). oauth4webapi signs Ed25519 keys as `alg: Ed25519` (RFC 9864), openid-client is
 * told to sign `EdDSA`: both names are accepted.
 */
import * as oauth from "oauth4webapi"
import * as openid from "openid-client"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, testOAuth } from "../../support/app.ts"
import { type ClientKey, jwksOf, KEY_ALGS, makeKey, serveJwks } from "../../support/assertionKit.ts"

const ISSUER = "https://api.example.test"
let app: TestApp
let jwksServer: Awaited<ReturnType<typeof serveJwks>>
const keys = new Map<string, ClientKey>()
const scopes = ["rates:read", "health:read"]

beforeAll(async () => {
  for (const alg of KEY_ALGS) keys.set(alg, await makeKey(alg))
  jwksServer = await serveJwks(jwksOf(...keys.values()))
  app = await startTestApp({
    oauth: testOAuth({
      clients: KEY_ALGS.flatMap((alg) => [
        { name: `inline ${alg}`, clientId: `inline-${alg}`, scopes, keys: { jwks: jwksOf(keys.get(alg)!) } },
        { name: `by uri ${alg}`, clientId: `uri-${alg}`, scopes, keys: { jwksUri: jwksServer.url } }
      ])
    })
  })
})
afterAll(async () => {
  await app?.close()
  await jwksServer?.close()
})

/** The server's metadata as a client configures it: its issuer, and where its token endpoint listens here. */
const server = () => ({ issuer: ISSUER, token_endpoint: `${app.url}/oauth/token` })

const withOauth4webapi = async (clientId: string, key: ClientKey, scope: string) => {
  const as: oauth.AuthorizationServer = server()
  const client: oauth.Client = { client_id: clientId }
  const response = await oauth.clientCredentialsGrantRequest(
    as,
    client,
    oauth.PrivateKeyJwt({ key: key.privateKey, kid: key.kid }),
    new URLSearchParams({ scope }),
    { [oauth.allowInsecureRequests]: true }
  )
  return oauth.processClientCredentialsResponse(as, client, response)
}

const withOpenidClient = async (clientId: string, key: ClientKey, scope: string) => {
  const toEdDSA: openid.ModifyAssertionOptions = {
    [openid.modifyAssertion]: (header) => {
      if (header.alg === "Ed25519") header.alg = "EdDSA"
    }
  }
  const config = new openid.Configuration(server(), clientId, undefined, openid.PrivateKeyJwt({ key: key.privateKey, kid: key.kid }, toEdDSA))
  openid.allowInsecureRequests(config)
  return openid.clientCredentialsGrant(config, { scope })
}

/** The protected operation: POST exchange-rates (needs rates:read) with the token. */
const ratesWith = (token: string) =>
  fetch(`${app.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ cryptos: ["BTC"] })
  })

const libraries = [["oauth4webapi", withOauth4webapi], ["openid-client", withOpenidClient]] as const

describe.each(libraries)("%s PrivateKeyJwt", (_, grant) => {
  it.each(KEY_ALGS.flatMap((alg) => [["inline", alg], ["jwks_uri", alg]] as const))("gets a token: %s %s key", async (registered, alg) => {
    const clientId = `${registered === "inline" ? "inline" : "uri"}-${alg}`
    const token = await grant(clientId, keys.get(alg)!, "rates:read")
    expect(token.token_type.toLowerCase()).toBe("bearer")
    expect(token.scope).toBe("rates:read")
    const rates = await ratesWith(token.access_token)
    expect(rates.status).toBe(200)
    expect((await rates.json()).rates[0].symbol).toBe("BTC")
  })

  it("a token without rates:read is refused on the operation, as a secret client's is (403)", async () => {
    const token = await grant("inline-ES256", keys.get("ES256")!, "health:read")
    const rates = await ratesWith(token.access_token)
    expect(rates.status).toBe(403)
    expect(rates.headers.get("www-authenticate")).toContain('error="insufficient_scope"')
  })

  it("a key the client did not register gets invalid_client", async () => {
    const error = await grant("inline-ES256", keys.get("RS256")!, "rates:read").catch((e: unknown) => e)
    const status = (error as { status?: number }).status
    expect(status).toBe(401)
  })
})

it("discovery lists both methods and the assertion algorithms", async () => {
  const metadata = await (await fetch(`${app.url}/.well-known/oauth-authorization-server`)).json()
  expect(metadata.token_endpoint_auth_methods_supported).toEqual(["client_secret_basic", "private_key_jwt"])
  expect(metadata.token_endpoint_auth_signing_alg_values_supported).toEqual(["RS256", "PS256", "ES256", "EdDSA", "Ed25519"])
})

it("the OpenAPI document describes the assertion form fields and both ways to authenticate", async () => {
  const spec = await (await fetch(`${app.url}/openapi.json`)).json()
  const operation = spec.paths["/oauth/token"].post
  const schema = operation.requestBody.content["application/x-www-form-urlencoded"].schema
  const resolved = schema.$ref === undefined ? schema : spec.components.schemas[schema.$ref.split("/").pop()]
  expect(Object.keys(resolved.properties)).toEqual(["grant_type", "scope", "client_id", "client_assertion_type", "client_assertion"])
  expect(JSON.stringify(resolved.properties.client_assertion_type)).toContain("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
  expect(operation.security).toEqual([{ basicClient: [] }, {}])
  expect(operation.description).toContain("private_key_jwt")
})
