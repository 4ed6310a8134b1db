import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { BearerAuth, BearerChallenge, challengeFor, parseBearer } from "../../../src/oauth/BearerAuth.ts"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import { discoveryDocument } from "../../../src/oauth/discovery.ts"
import { InsufficientScope, InvalidToken } from "../../../src/oauth/errors.ts"
import type { Scope } from "../../../src/oauth/scopes.ts"
import { TokenService } from "../../../src/oauth/TokenService.ts"
import { BASE, makeFakeClock, memoryRuntime } from "../../support/oauth.ts"

const clock = makeFakeClock()
const runtime = memoryRuntime({
  clients: [
    { name: "Rates", scopes: ["rates:read"], clientId: "rates-client", secret: "s1" },
    { name: "All", scopes: ["health:read", "rates:read", "subscriptions:write"], clientId: "all-client", secret: "s2" }
  ],
  clock
})
afterAll(() => runtime.dispose())

const token = (clientId: string, scopes: ReadonlyArray<Scope>) =>
  runtime.runPromise(Effect.flatMap(TokenService, (t) => t.issue({ clientId }, scopes))).then((t) => t.accessToken)
const authenticate = (header: string | undefined, scope: Scope | undefined) =>
  runtime.runPromise(Effect.flatMap(BearerAuth, (b) => Effect.result(b.authenticate(header, scope))))

describe("BearerAuth.authenticate", () => {
  it("is anonymous without an Authorization header", async () => {
    const result = await authenticate(undefined, "rates:read")
    expect(result).toMatchObject({ _tag: "Success", success: { _tag: "Anonymous" } })
  })

  it("authenticates a valid token with the scope; the scheme is case-insensitive", async () => {
    const t = await token("rates-client", ["rates:read"])
    for (const header of [`Bearer ${t}`, `bearer ${t}`, `BEARER ${t}`, `Bearer   ${t}`]) {
      const result = await authenticate(header, "rates:read")
      expect(result).toMatchObject({
        _tag: "Success",
        success: { _tag: "Authenticated", principal: { clientId: "rates-client", scopes: ["rates:read"] } }
      })
    }
    expect((await authenticate(`Bearer ${t}`, undefined))._tag).toBe("Success")
  })

  it.each([
    ["Basic credentials", "Basic cmF0ZXMtY2xpZW50OnMx"],
    ["Bearer without a token", "Bearer"],
    ["Bearer with blanks only", "Bearer   "],
    ["empty header", ""],
    ["extra parts", "Bearer abc def"],
    ["characters outside b64token", "Bearer abc$def"],
    ["garbage token", "Bearer abc.def.ghi"],
    ["token in a different scheme", "Token abc"]
  ])("fails with InvalidToken for %s", async (_, header) => {
    const result = await authenticate(header, "rates:read")
    expect(result._tag).toBe("Failure")
    if (result._tag === "Failure") {
      expect(result.failure).toBeInstanceOf(InvalidToken)
      expect(challengeFor(result.failure)).toBe('Bearer realm="api", error="invalid_token"')
    }
  })

  it("fails with InvalidToken (expired) once the token expires", async () => {
    const t = await token("rates-client", ["rates:read"])
    clock.advance(900_000)
    const result = await authenticate(`Bearer ${t}`, "rates:read")
    clock.advance(-900_000)
    expect(result).toMatchObject({ _tag: "Failure", failure: { _tag: "InvalidToken", reason: "expired" } })
  })

  it("fails with InsufficientScope naming the required scope", async () => {
    const t = await token("all-client", ["health:read", "rates:read"])
    const result = await authenticate(`Bearer ${t}`, "subscriptions:write")
    expect(result._tag).toBe("Failure")
    if (result._tag === "Failure") {
      expect(result.failure).toBeInstanceOf(InsufficientScope)
      expect(result.failure).toMatchObject({ requiredScope: "subscriptions:write", grantedScopes: ["health:read", "rates:read"] })
      expect(challengeFor(result.failure)).toBe('Bearer realm="api", error="insufficient_scope", scope="subscriptions:write"')
    }
  })

  it("narrows an older token to the client's current scopes", async () => {
    // A token claiming a scope the client does not have (e.g. removed later) does not grant it.
    const t = await token("rates-client", ["rates:read", "health:read"])
    const result = await authenticate(`Bearer ${t}`, "health:read")
    expect(result).toMatchObject({ _tag: "Failure", failure: { _tag: "InsufficientScope" } })
  })

  it("rejects the token of a client revoked after issue", async () => {
    const t = await token("all-client", ["rates:read"])
    await runtime.runPromise(Effect.flatMap(ClientRegistry, (r) => r.revoke("all-client")))
    const result = await authenticate(`Bearer ${t}`, "rates:read")
    expect(result).toMatchObject({ _tag: "Failure", failure: { _tag: "InvalidToken", reason: "revoked_client" } })
  })
})

describe("Bearer helpers", () => {
  it("gives the exact WWW-Authenticate strings", () => {
    expect(BearerChallenge.invalidToken).toBe('Bearer realm="api", error="invalid_token"')
    expect(BearerChallenge.insufficientScope("rates:read")).toBe('Bearer realm="api", error="insufficient_scope", scope="rates:read"')
  })

  it("parses RFC 6750 b64token credentials", () => {
    expect(parseBearer("Bearer a-b.c_d~e+f/g==")).toBe("a-b.c_d~e+f/g==")
    expect(parseBearer("Bearer a=b")).toBeUndefined()
    expect(parseBearer("Bearer a b")).toBeUndefined()
  })
})

describe("discoveryDocument", () => {
  it("is the RFC 8414 document for the issuer", () => {
    expect(discoveryDocument({ publicBaseUrl: BASE })).toEqual({
      issuer: BASE,
      token_endpoint: `${BASE}/oauth/token`,
      jwks_uri: `${BASE}/.well-known/jwks.json`,
      scopes_supported: ["health:read", "rates:read", "subscriptions:write"],
      grant_types_supported: ["client_credentials"],
      token_endpoint_auth_methods_supported: ["client_secret_basic", "private_key_jwt"],
      token_endpoint_auth_signing_alg_values_supported: ["RS256", "PS256", "ES256", "EdDSA", "Ed25519"],
      response_types_supported: [],
      service_documentation: `${BASE}/docs`
    })
  })
})
