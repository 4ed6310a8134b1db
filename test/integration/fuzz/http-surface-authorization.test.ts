/**
 * The HTTP surface fuzzed (http-surface-support.ts): Authorization on the public operations, as RFC 6750 and C3 say
 * (absent, valid, without the scope, forged, malformed, repeated).
 */
import fc from "fast-check"
import { SignJWT, generateKeyPair, exportJWK } from "jose"
import { describe, expect, it } from "vitest"
import { oddUnicode } from "../../support/fuzz/arbitraries.ts"
import { expectNoViolations, fuzzParams } from "../../support/fuzz/harness.ts"
import { jsonOf } from "../../support/fuzz/invariants.ts"
import { happyRequest } from "../../support/fuzz/happyRequest.ts"
import { allScopesToken, healthOnlyToken, target, useSurfaceTarget } from "./http-surface-support.ts"

useSurfaceTarget()

describe("Authorization on the public operations", () => {
  const operations = [
    // Health ignores Authorization (C3): every variant answers 200.
    { path: "/api/health", method: "GET", scope: undefined },
    { path: "/api/v1/exchange-rates", method: "POST", scope: "rates:read" },
    { path: "/api/subscribe", method: "POST", scope: "subscriptions:write" }
  ] as const

  /** RFC 6750 §2.1 `credentials = "Bearer" 1*SP b64token`, scheme case-insensitive; OWS trimmed by HTTP. */
  const BEARER_SYNTAX = /^bearer +[A-Za-z0-9\-._~+/]+=*$/i

  type Variant = { readonly header: string | undefined; readonly token: "valid-all" | "valid-health" | "bad" | "none" }

  const foreignTokens = async () => {
    const { privateKey } = await generateKeyPair("ES256")
    const now = Math.floor(Date.now() / 1000)
    const claims = { client_id: "svc-all", scope: "health:read rates:read subscriptions:write" }
    const forged = await new SignJWT(claims).setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: JSON.parse(Buffer.from(allScopesToken.split(".")[0]!, "base64url").toString()).kid })
      .setIssuer("https://api.example.test").setAudience("https://api.example.test/api").setSubject("svc-all").setIssuedAt(now).setExpirationTime(now + 600).setJti("x").sign(privateKey)
    const hs = await new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "at+jwt" }).setIssuer("https://api.example.test").setAudience("https://api.example.test/api").setSubject("svc-all").setIssuedAt(now).setExpirationTime(now + 600)
      .sign(new TextEncoder().encode(JSON.stringify(await exportJWK((await generateKeyPair("ES256")).publicKey))))
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url")
    const [h, p, s] = allScopesToken.split(".") as [string, string, string]
    const payload = JSON.parse(Buffer.from(p, "base64url").toString())
    return [
      forged, // right kid, wrong key
      hs, // algorithm confusion
      `${b64({ alg: "none", typ: "at+jwt" })}.${p}.`, // unsigned
      `${h}.${b64({ ...payload, scope: "health:read rates:read subscriptions:write", exp: payload.exp + 3600 })}.${s}`, // altered claims
      `${h}.${b64({ ...payload, exp: now - 10 })}.${s}`, // "expired", signature no longer matches either
      `${h}.${p}.${s.slice(0, -2)}${s.endsWith("AA") ? "BB" : "AA"}`, // flipped signature
      `${h}.${p}`, // two parts
      `${allScopesToken}.${s}`, // four parts
      allScopesToken.toLowerCase()
    ]
  }

  it("absent → anonymous, valid with scope → 200, valid without scope → 403, anything else → 401 with a Bearer challenge", async () => {
    const forged = await foreignTokens()
    const variant: fc.Arbitrary<Variant> = fc.oneof(
      fc.constant<Variant>({ header: undefined, token: "none" }),
      fc.tuple(fc.constantFrom("Bearer", "bearer", "BEARER", "BeArEr"), fc.constantFrom(" ", "  ")).map(([scheme, sp]) => ({ header: `${scheme}${sp}${allScopesToken}`, token: "valid-all" as const })),
      fc.constant<Variant>({ header: `Bearer ${healthOnlyToken}`, token: "valid-health" }),
      fc.constantFrom(...forged).map((t) => ({ header: `Bearer ${t}`, token: "bad" as const })),
      fc.constantFrom("", " ", "Bearer", "Bearer ", "Bearer  ", "Basic abc", "Basic " + Buffer.from("svc-all:secret-all").toString("base64"), "Token abc", "Bearer a b", "Bearer\tabc", "Bearer ==abc", "Bearer a=b", "Bearer ✓", "Bearer \u00e9", `Bearer ${"a".repeat(9_000)}`, `Bearer ${allScopesToken}, Bearer ${allScopesToken}`, `${allScopesToken}`, `Bearer "${allScopesToken}"`, "Bearer null", "Bearer undefined")
        .map((header) => ({ header, token: "bad" as const })),
      fc.tuple(fc.constantFrom("Bearer ", "bearer "), fc.stringMatching(/^[A-Za-z0-9\-._~+/]{1,64}=*$/)).map(([s, t]) => ({ header: s + t, token: "bad" as const })),
      fc.tuple(fc.constantFrom("Bearer ", ""), oddUnicode).map(([s, t]) => ({ header: s + t, token: "bad" as const }))
    )
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...operations), variant, async (op, { header, token }) => {
        const happy = happyRequest(op.path, op.method)
        // Latin-1 bytes for odd headers: the raw writer sends what node:http would refuse.
        const headerLines = [...happy.headers, ...(header === undefined ? [] : [["Authorization", header] as [string, string]])]
        const body = happy.body ?? ""
        const bytes = Buffer.concat([
          Buffer.from(`${op.method} ${op.path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`),
          Buffer.from(headerLines.map(([n, v]) => `${n}: ${v}\r\n`).join(""), "utf8"),
          Buffer.from(`\r\n${body}`)
        ])
        const checked = await target.exchangeBytes(bytes, { method: op.method, target: op.path, parserMayRefuse: true })
        const context = `${op.method} ${op.path} Authorization: ${JSON.stringify(header?.slice(0, 80))}`
        expectNoViolations(checked, context)
        const res = checked.response
        if (res.status === 400 && res.body.length === 0) return // Node refused a control character in the value
        const syntaxOk = header !== undefined && BEARER_SYNTAX.test(header.trim())
        if (op.scope === undefined || token === "none") expect(res.status, context).toBe(200)
        else if (token === "valid-all") expect(res.status, context).toBe(200)
        else if (token === "valid-health") {
          // A health-only token opens no operation that checks scopes.
          expect(res.status, context).toBe(403)
          if (res.status === 403) expect(res.headers["www-authenticate"], context).toBe(`Bearer realm="api", error="insufficient_scope", scope="${op.scope}"`)
        } else {
          expect(res.status, `${context} (syntax ${syntaxOk ? "ok" : "bad"})`).toBe(401)
          expect(res.headers["www-authenticate"], context).toBe(`Bearer realm="api", error="invalid_token"`)
          expect(jsonOf(res)?.code, context).toBe("invalid_token")
        }
      }),
      fuzzParams(200)
    )
  })

  it("a repeated Authorization header: the first one decides (Node keeps the first), never a 5xx", async () => {
    for (const [first, second, expected] of [[`Bearer ${allScopesToken}`, "Bearer junk", 200], ["Bearer junk", `Bearer ${allScopesToken}`, 401]] as const) {
      const checked = await target.exchange({
        method: "POST",
        path: "/api/v1/exchange-rates",
        headers: [["Authorization", first], ["Authorization", second], ["Content-Type", "application/json"]],
        body: JSON.stringify({ cryptos: ["BTC"] })
      })
      expectNoViolations(checked, `Authorization ×2 (${first.slice(0, 12)}…, ${second.slice(0, 12)}…)`)
      expect(checked.response.status).toBe(expected)
    }
  })
})
