/**
 * Issue 14, finding 11, over real HTTP: a token whose `iat` lies far in the future, or whose lifetime
 * (exp − iat) exceeds TOKEN_TTL_SECONDS, was accepted. Whoever holds a signing key for a moment (a
 * leaked backup, a key rotated out but still published) could mint tokens that outlive the rotation.
 * C6: `iat` more than 60 s ahead, or a lifetime over the configured TTL, makes the token invalid.
 *
 * Tokens are forged with the server's own signing key, so only these claims can be wrong.
 */
import { Context, Effect, Layer } from "effect"
import * as jose from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SigningKeys } from "../../../src/oauth/SigningKeys.ts"
import { startTestApp, type TestApp, testOAuth } from "../../support/app.ts"
import { expectProblem } from "../../support/problems.ts"

const BASE = "https://api.example.test"
const TTL = 900

let app: TestApp
let keys: Context.Service.Shape<typeof SigningKeys>
beforeAll(async () => {
  // The application's OAuth core, whose signing keys the test keeps to forge with.
  const oauth = testOAuth().pipe(Layer.tap((context) => Effect.sync(() => (keys = Context.get(context, SigningKeys)))))
  app = await startTestApp({ env: { PUBLIC_BASE_URL: BASE, TOKEN_TTL_SECONDS: String(TTL) }, oauth })
})
afterAll(() => app.close())

const forge = async (claims: { readonly iat: number; readonly exp: number }) => {
  const { kid, privateKey } = await Effect.runPromise(keys.signingKey())
  return new jose.SignJWT({ client_id: "svc-all", scope: "rates:read" })
    .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid })
    .setIssuer(BASE)
    .setSubject("svc-all")
    .setAudience(`${BASE}/api`)
    .setIssuedAt(claims.iat)
    .setExpirationTime(claims.exp)
    .setJti(crypto.randomUUID())
    .sign(privateKey)
}

/** A protected operation: an accepted token reaches body validation (400), a refused one gets 401. */
const ratesWith = (token: string) =>
  fetch(`${app.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: "{}"
  })

const now = () => Math.floor(Date.now() / 1000)

describe("forged token lifetimes", () => {
  it("accepts a token as the server issues it, and one issued up to 60 s ahead (clock skew)", async () => {
    for (const iat of [now(), now() + 30]) {
      const res = await ratesWith(await forge({ iat, exp: iat + TTL }))
      expect(res.status, `iat = now + ${iat - now()}`).toBe(400)
      await res.body?.cancel()
    }
  })

  it("refuses a token issued more than 60 s in the future", async () => {
    const iat = now() + 3600
    await expectProblem(await ratesWith(await forge({ iat, exp: iat + TTL })), 401, "invalid_token")
    const justOver = now() + 90
    await expectProblem(await ratesWith(await forge({ iat: justOver, exp: justOver + TTL })), 401, "invalid_token")
  })

  it("refuses a token whose lifetime exceeds TOKEN_TTL_SECONDS", async () => {
    const iat = now()
    await expectProblem(await ratesWith(await forge({ iat, exp: iat + 365 * 24 * 3600 })), 401, "invalid_token")
    await expectProblem(await ratesWith(await forge({ iat, exp: iat + TTL + 1 })), 401, "invalid_token")
  })

  it("answers the refusal with the Bearer challenge", async () => {
    const iat = now()
    const res = await ratesWith(await forge({ iat, exp: iat + 10 * TTL }))
    expect(res.headers.get("www-authenticate")).toBe(`Bearer realm="api", error="invalid_token"`)
    await res.body?.cancel()
  })
})
