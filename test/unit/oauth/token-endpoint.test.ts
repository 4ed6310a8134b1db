import * as jose from "jose"
import { afterAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import { SigningKeys } from "../../../src/oauth/SigningKeys.ts"
import {
  BASIC_CHALLENGE,
  BASIC_CHALLENGE_INVALID_CLIENT,
  type TokenEndpointResponse,
  type TokenErrorBody,
  TokenEndpoint,
  type TokenSuccessBody
} from "../../../src/oauth/TokenEndpoint.ts"
import { AUDIENCE, BASE, basic, FORM, memoryRuntime, SPECIAL_ID, SPECIAL_SECRET } from "../../support/oauth.ts"

const FULL = { name: "Full", scopes: ["health:read", "rates:read"], clientId: "full-client", secret: "full-secret" }
const SPECIAL = { name: "Special", scopes: ["rates:read"], clientId: SPECIAL_ID, secret: SPECIAL_SECRET }
const REVOKED = { name: "Gone", scopes: ["rates:read"], clientId: "gone", secret: "gone-secret" }

const runtime = memoryRuntime({ clients: [FULL, SPECIAL, REVOKED], maxFailuresPerMinute: 1_000_000 })
afterAll(() => runtime.dispose())

await runtime.runPromise(Effect.flatMap(ClientRegistry, (r) => r.revoke("gone")))

const FULL_AUTH = basic(FULL.clientId, FULL.secret)
let ip = 0

const call = (input: {
  authorization?: string | undefined
  contentType?: string | undefined
  body?: string
  requestId?: string
}): Promise<TokenEndpointResponse> =>
  runtime.runPromise(Effect.flatMap(TokenEndpoint, (e) =>
    e.handle({
      authorization: "authorization" in input ? input.authorization : FULL_AUTH,
      contentType: "contentType" in input ? input.contentType : FORM,
      body: input.body ?? "grant_type=client_credentials",
      // A fresh address per call: the limiter is not under test here.
      clientIp: `10.0.${Math.floor(++ip / 250)}.${ip % 250}`,
      requestId: input.requestId
    })))

const DESCRIPTION_CHARSET = /^[\x20\x21\x23-\x5B\x5D-\x7E]*$/

/** Every error: exact headers, both OAuth and problem members, consistent with the status. */
const expectError = (res: TokenEndpointResponse, status: number, error: string) => {
  expect(res.status).toBe(status)
  expect(res.headers["content-type"]).toBe("application/json")
  expect(res.headers["cache-control"]).toBe("no-store")
  expect(res.headers["pragma"]).toBe("no-cache")
  const body = JSON.parse(res.body) as TokenErrorBody
  expect(body).toEqual(res.json)
  expect(body.error).toBe(error)
  expect(body.code).toBe(error)
  expect(body.type).toBe(`${BASE}/problems/${error}`)
  expect(body.status).toBe(status)
  expect(typeof body.title).toBe("string")
  expect(body.title.length).toBeGreaterThan(0)
  expect(body.detail).toBe(body.error_description)
  expect(body.resolution.length).toBeGreaterThan(0)
  expect(body.error_description).toMatch(DESCRIPTION_CHARSET)
  expect(body.error_description.length).toBeGreaterThan(0)
  if (status !== 401) expect(res.headers["www-authenticate"]).toBeUndefined()
  return body
}

const expectToken = (res: TokenEndpointResponse, scope: string) => {
  expect(res.status).toBe(200)
  expect(res.headers).toEqual({ "content-type": "application/json", "cache-control": "no-store", pragma: "no-cache" })
  const body = JSON.parse(res.body) as TokenSuccessBody
  expect(Object.keys(body).sort()).toEqual(["access_token", "expires_in", "scope", "token_type"])
  expect(body.token_type).toBe("Bearer")
  expect(body.expires_in).toBe(900)
  expect(body.scope).toBe(scope)
  return body
}

describe("token endpoint: success", () => {
  it("issues a Bearer JWT with all of the client's scopes when scope is absent", async () => {
    const body = expectToken(await call({}), "health:read rates:read")
    const jwks = await runtime.runPromise(Effect.flatMap(SigningKeys, (k) => k.jwks()))
    const { payload } = await jose.jwtVerify(body.access_token, jose.createLocalJWKSet({ keys: [...jwks.keys] }), {
      issuer: BASE,
      audience: AUDIENCE,
      typ: "at+jwt",
      algorithms: ["ES256"]
    })
    expect(payload.scope).toBe("health:read rates:read")
    expect(payload.client_id).toBe("full-client")
  })

  it("grants a requested subset, in canonical order, with repeats collapsed", async () => {
    expectToken(await call({ body: "grant_type=client_credentials&scope=rates%3Aread" }), "rates:read")
    expectToken(await call({ body: "scope=rates:read+health:read&grant_type=client_credentials" }), "health:read rates:read")
    expectToken(await call({ body: "grant_type=client_credentials&scope=rates:read%20rates:read" }), "rates:read")
  })

  it("treats an empty scope as absent and ignores unknown parameters, even repeated", async () => {
    expectToken(await call({ body: "grant_type=client_credentials&scope=" }), "health:read rates:read")
    expectToken(await call({ body: "grant_type=client_credentials&foo=1&foo=2&audience=x&&" }), "health:read rates:read")
    // An empty duplicate is an omitted parameter, not a repeat.
    expectToken(await call({ body: "grant_type=client_credentials&scope=&scope=rates:read" }), "rates:read")
  })

  it("accepts content-type parameters and case variations, and a lower-case basic scheme", async () => {
    expectToken(await call({ contentType: "application/x-www-form-urlencoded;charset=UTF-8" }), "health:read rates:read")
    expectToken(await call({ contentType: "Application/X-WWW-Form-Urlencoded ; charset=\"utf-8\"" }), "health:read rates:read")
    expectToken(await call({ authorization: FULL_AUTH.replace("Basic", "basic") }), "health:read rates:read")
  })

  it("decodes client_secret_basic per RFC 6749 §2.3.1: ids and secrets with -._~:+%& spaces and non-ASCII", async () => {
    // oauth4webapi style (escapes even -_.~) and plain encodeURIComponent style both decode.
    expectToken(await call({ authorization: basic(SPECIAL_ID, SPECIAL_SECRET) }), "rates:read")
    expectToken(await call({ authorization: basic(SPECIAL_ID, SPECIAL_SECRET, encodeURIComponent) }), "rates:read")
    // Unencoded: '+' becomes a space and ':' in the id splits early, so authentication fails.
    const raw = `Basic ${Buffer.from(`full-client:${FULL.secret}+`).toString("base64")}`
    expectError(await call({ authorization: raw }), 401, "invalid_client")
  })

  it("never returns a refresh token", async () => {
    const res = await call({})
    expect(res.body).not.toContain("refresh_token")
  })
})

describe("token endpoint: client authentication", () => {
  it("401 invalid_client with a plain Basic challenge when no credentials are sent", async () => {
    const res = await call({ authorization: undefined })
    expectError(res, 401, "invalid_client")
    expect(res.headers["www-authenticate"]).toBe(BASIC_CHALLENGE)
    expect(BASIC_CHALLENGE).toBe('Basic realm="oauth"')
  })

  it("401 invalid_client for client_secret_post alone (unsupported method)", async () => {
    const res = await call({ authorization: undefined, body: "grant_type=client_credentials&client_id=full-client&client_secret=full-secret" })
    expectError(res, 401, "invalid_client")
    expect(res.headers["www-authenticate"]).toBe(BASIC_CHALLENGE)
  })

  it("401 invalid_client with error challenge for wrong secret, unknown id and revoked client alike", async () => {
    const bodies = []
    for (const authorization of [basic("full-client", "wrong"), basic("nobody", "full-secret"), basic("gone", "gone-secret")]) {
      const res = await call({ authorization })
      bodies.push(expectError(res, 401, "invalid_client"))
      expect(res.headers["www-authenticate"]).toBe(BASIC_CHALLENGE_INVALID_CLIENT)
      expect(BASIC_CHALLENGE_INVALID_CLIENT).toBe('Basic realm="oauth", error="invalid_client"')
    }
    // Identical answers: nothing tells an unknown id from a wrong secret or a revoked client.
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1)
  })

  it("401 invalid_client for another scheme", async () => {
    const res = await call({ authorization: "Bearer abc" })
    expectError(res, 401, "invalid_client")
    expect(res.headers["www-authenticate"]).toBe(BASIC_CHALLENGE_INVALID_CLIENT)
  })

  it.each([
    ["no credentials after the scheme", "Basic"],
    ["spaces only", "Basic    "],
    ["not base64", "Basic !!!!"],
    ["base64url alphabet", `Basic ${Buffer.from("a-b:c").toString("base64url")}_-`],
    ["no colon", `Basic ${Buffer.from("full-client").toString("base64")}`],
    ["bad escape in id", `Basic ${Buffer.from("full%zzclient:full-secret").toString("base64")}`],
    ["bad escape in secret", `Basic ${Buffer.from("full-client:full%2").toString("base64")}`],
    ["escape of invalid UTF-8", `Basic ${Buffer.from("full-client:%C3%28").toString("base64")}`],
    ["raw invalid UTF-8", `Basic ${Buffer.from([0x66, 0x3a, 0xff, 0xfe]).toString("base64")}`],
    ["empty id", `Basic ${Buffer.from(":full-secret").toString("base64")}`],
    ["extra parts", `${FULL_AUTH} extra`]
  ])("400 invalid_request for malformed Basic credentials: %s", async (_, authorization) => {
    expectError(await call({ authorization }), 400, "invalid_request")
  })

  it("400 invalid_request when Basic is combined with credentials in the body", async () => {
    for (const extra of ["client_id=other-client", "client_secret=full-secret", "client_id=full-client&client_secret=full-secret", "client_assertion=x&client_assertion_type=y"]) {
      expectError(await call({ body: `grant_type=client_credentials&${extra}` }), 400, "invalid_request")
    }
  })

  it("accepts a client_id in the body that names the Basic client (C6)", async () => {
    expectToken(await call({ body: "grant_type=client_credentials&client_id=full-client&scope=rates%3Aread" }), "rates:read")
  })
})

describe("token endpoint: request parameters", () => {
  it("400 invalid_request when grant_type is missing or empty", async () => {
    expectError(await call({ body: "" }), 400, "invalid_request")
    expectError(await call({ body: "scope=rates:read" }), 400, "invalid_request")
    expectError(await call({ body: "grant_type=" }), 400, "invalid_request")
  })

  it("400 unsupported_grant_type for any other grant (case-sensitive)", async () => {
    for (const grant of ["password", "authorization_code", "refresh_token", "CLIENT_CREDENTIALS", "client_credentials%20"]) {
      expectError(await call({ body: `grant_type=${grant}` }), 400, "unsupported_grant_type")
    }
  })

  it("400 invalid_request for a repeated parameter", async () => {
    expectError(await call({ body: "grant_type=client_credentials&grant_type=client_credentials" }), 400, "invalid_request")
    expectError(await call({ body: "grant_type=client_credentials&scope=rates:read&scope=health:read" }), 400, "invalid_request")
  })

  it("400 invalid_request for a malformed percent-encoding in the body", async () => {
    expectError(await call({ body: "grant_type=client_credentials&scope=%zz" }), 400, "invalid_request")
    expectError(await call({ body: "grant_type=client%5" }), 400, "invalid_request")
  })

  it("400 invalid_request for a body that is not form-encoded UTF-8", async () => {
    expectError(await call({ contentType: "application/json", body: '{"grant_type":"client_credentials"}' }), 400, "invalid_request")
    expectError(await call({ contentType: undefined }), 400, "invalid_request")
    expectError(await call({ contentType: "text/plain" }), 400, "invalid_request")
    expectError(await call({ contentType: "application/x-www-form-urlencoded; charset=iso-8859-1" }), 400, "invalid_request")
  })

  it.each([
    ["not allowed for the client", "subscriptions:write"],
    ["one of two not allowed", "rates:read subscriptions:write"],
    ["unknown", "rates:write"],
    ["wrong case", "Rates:read"],
    ["double space", "rates:read  health:read"],
    ["leading space", " rates:read"],
    ["trailing space", "rates:read "],
    ["quote", 'rates:read"'],
    ["backslash", "rates\\read"],
    ["tab", "rates:read\thealth:read"],
    ["non-ASCII", "rates:réad"]
  ])("400 invalid_scope when the scope is %s", async (_, scope) => {
    const res = await call({ body: `grant_type=client_credentials&scope=${encodeURIComponent(scope)}` })
    expectError(res, 400, "invalid_scope")
  })

  it("adds instance = urn:uuid:<request id> to error bodies when given", async () => {
    const res = await call({ authorization: undefined, requestId: "0b5f4a38-1f7e-4e55-9d5d-2f4c3b0e9a11" })
    expect((res.json as TokenErrorBody).instance).toBe("urn:uuid:0b5f4a38-1f7e-4e55-9d5d-2f4c3b0e9a11")
  })

  it("answers a revoked client with invalid_client, never a token", async () => {
    const res = await call({ authorization: basic("gone", "gone-secret") })
    expect(res.status).toBe(401)
    expect(res.body).not.toContain("access_token")
    expect(res.outcome).toEqual({ result: "invalid_client", reason: "revoked" })
  })

  it("keeps secrets out of the response and the outcome", async () => {
    for (const res of [await call({}), await call({ authorization: basic("full-client", "wrong-secret-xyz") })]) {
      expect(res.body).not.toContain("full-secret")
      expect(JSON.stringify(res.outcome)).not.toMatch(/secret-xyz|full-secret/)
    }
  })
})
