/**
 * POST /oauth/token fuzzed through the real HTTP app (CONTRACT C6, RFC 6749 §2.3.1, §3.2, §4.4, §5.2):
 * duplicate, empty, unknown and percent-escaped parameters, odd Basic encodings, other schemes,
 * JSON bodies, every Content-Type. Besides the invariants (application/json errors with `error` and
 * the problem members, WWW-Authenticate on 401, no-store on 200) the properties are the RFC's:
 * unknown parameters never change the answer, a token is only issued for good credentials and a
 * well-formed grant, and a form-encoded id or secret authenticates like the plain one.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { JwtBearerAssertionType } from "../../../src/api/schemas.ts"
import { testClients } from "../../support/app.ts"
import { oddUnicode } from "../../support/fuzz/arbitraries.ts"
import { expectNoViolations, type FuzzTarget, fuzzParams, startFuzzTarget } from "../../support/fuzz/harness.ts"
import { jsonOf } from "../../support/fuzz/invariants.ts"

let target: FuzzTarget
beforeAll(async () => {
  target = await startFuzzTarget()
})
afterAll(() => target.close())

const KNOWN_PARAMETERS = ["grant_type", "scope", "client_id", "client_secret", "client_assertion", "client_assertion_type"]
/** The test app's client with every scope (test/support/app.ts). */
const ALL = { clientId: "svc-all", secret: "secret-all", scopes: testClients.find((c) => c.clientId === "svc-all")!.scopes }
const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64")
const b64url = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url")

/** Form-encodes (RFC 6749 App. B) with some characters needlessly %-escaped: still the same value. */
const formEncode = (value: string, escapeAlso: ReadonlyArray<number> = [], lowerHex = false) =>
  [...value].map((ch, i) => {
    if (/[A-Za-z0-9*\-._]/.test(ch) && !escapeAlso.includes(i)) return ch
    if (ch === " " && !escapeAlso.includes(i)) return "+"
    const hex = [...Buffer.from(ch, "utf8")].map((b) => "%" + b.toString(16).toUpperCase().padStart(2, "0")).join("")
    return lowerHex ? hex.toLowerCase() : hex
  }).join("")

type Credentials = { readonly header: string | undefined; readonly good: boolean; readonly basicWellFormed: boolean }

const credentials: fc.Arbitrary<Credentials> = fc.oneof(
  // The right id and secret, form-encoded with arbitrary extra escapes (RFC 6749 §2.3.1).
  fc.tuple(fc.uniqueArray(fc.nat({ max: 12 }), { maxLength: 4 }), fc.boolean()).map(([escapes, lower]) => ({
    header: `Basic ${b64(`${formEncode(ALL.clientId, escapes, lower)}:${formEncode(ALL.secret, escapes, lower)}`)}`,
    good: true,
    basicWellFormed: true
  })),
  fc.constantFrom(`basic ${b64("svc-all:secret-all")}`, `BASIC  ${b64("svc-all:secret-all")}`).map((header) => ({ header, good: true, basicWellFormed: true })),
  // Wrong secrets, unknown clients, a near miss in case.
  fc.tuple(fc.constantFrom("svc-all", "svc-health", "nobody", "SVC-ALL"), fc.string({ maxLength: 20 })).filter(([id, secret]) => !(id === "svc-all" && secret === "secret-all") && !(id === "svc-health" && secret === "secret-health"))
    .map(([id, secret]) => ({ header: `Basic ${b64(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`)}`, good: false, basicWellFormed: true })),
  // Malformed Basic: not base64, no colon, empty id, bad escapes, not UTF-8, padding in the middle.
  fc.constantFrom(
    "Basic",
    "Basic ",
    "Basic !!!",
    `Basic ${b64("no-colon")}`,
    `Basic ${b64(":secret")}`,
    `Basic ${b64("svc%ZZall:secret-all")}`,
    `Basic ${b64("svc-all:secret%")}`,
    `Basic ${b64(Buffer.from([0xff, 0xfe, 0x3a, 0x41]))}`,
    `Basic ${b64("svc-all:secret-all").replace(/=*$/, "")}=`,
    `Basic ${b64("svc-all:secret-all")}====`,
    "Basic =abc",
    "Basic a",
    `Basic ${b64("svc-all:secret-all")} extra`
  ).map((header) => ({ header, good: false, basicWellFormed: false })),
  // Other schemes and nothing at all.
  fc.constantFrom("Bearer abc", "Digest username=x", "Token x", `Basic${b64("svc-all:secret-all")}`).map((header) => ({ header, good: false, basicWellFormed: false })),
  fc.constant({ header: undefined, good: false, basicWellFormed: false }),
  fc.tuple(fc.constantFrom("Basic ", ""), oddUnicode).map(([s, u]) => ({ header: s + u, good: false, basicWellFormed: false }))
)

type Param = readonly [name: string, value: string]

const grantParams = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Array<Param>>([["grant_type", "client_credentials"]]) },
  fc.constantFrom<Array<Param>>(
    [],
    [["grant_type", ""]],
    [["grant_type", "password"]],
    [["grant_type", "CLIENT_CREDENTIALS"]],
    [["grant_type", "client_credentials"], ["grant_type", "client_credentials"]],
    [["grant_type", "client_credentials"], ["grant_type", ""]],
    [["grant_type", "client%5Fcredentials"]]
  )
)
const scopeParams = fc.oneof(
  { weight: 3, arbitrary: fc.constant<Array<Param>>([]) },
  fc.constantFrom("health:read", "rates:read", "health:read rates:read", "subscriptions:write health:read", "", "admin", "health:read  rates:read", " health:read", "health:read+rates:read", "rates%3Aread", "HEALTH:READ")
    .map((scope): Array<Param> => [["scope", scope]]),
  fc.constant<Array<Param>>([["scope", "health:read"], ["scope", "rates:read"]])
)
const unknownParams = fc.array(
  fc.tuple(fc.stringMatching(/^[a-z_]{1,12}$/).filter((n) => !KNOWN_PARAMETERS.includes(n)), fc.oneof(fc.string({ maxLength: 12 }), oddUnicode)),
  { maxLength: 3 }
)
const bodyCredentialParams = fc.oneof(
  { weight: 5, arbitrary: fc.constant<Array<Param>>([]) },
  fc.constantFrom<Array<Param>>(
    [["client_id", "svc-all"]],
    [["client_id", "svc-health"]],
    [["client_secret", "secret-all"]],
    [["client_id", "svc-all"], ["client_secret", "secret-all"]],
    // private_key_jwt attempts (issue 34): an unsigned assertion naming the client, junk, half of the pair.
    [["client_assertion_type", JwtBearerAssertionType], ["client_assertion", `${b64url({ alg: "none" })}.${b64url({ iss: "svc-all", sub: "svc-all" })}.`]],
    [["client_assertion_type", JwtBearerAssertionType], ["client_assertion", "not.a.jwt"], ["client_id", "svc-all"]],
    [["client_assertion", "eyJhbGciOiJIUzI1NiJ9.e30.c2ln"]],
    [["client_assertion_type", JwtBearerAssertionType]]
  )
)

/** Serialises parameters, mostly properly form-encoded, sometimes raw. */
const serialise = (params: ReadonlyArray<Param>, raw: boolean) =>
  params.map(([n, v]) => (raw ? `${n}=${v}` : `${formEncode(n)}=${formEncode(v)}`)).join("&")

const contentTypes = fc.oneof(
  { weight: 8, arbitrary: fc.constant("application/x-www-form-urlencoded") },
  fc.constantFrom(
    "application/x-www-form-urlencoded; charset=utf-8",
    "Application/X-WWW-Form-Urlencoded;charset=UTF-8",
    "application/x-www-form-urlencoded; charset=ISO-8859-1",
    "application/json",
    "text/plain",
    "multipart/form-data; boundary=x",
    undefined
  )
)

interface TokenCase {
  readonly credentials: Credentials
  readonly params: ReadonlyArray<Param>
  readonly extra: ReadonlyArray<Param>
  readonly raw: boolean
  readonly contentType: string | undefined
  readonly jsonBody: boolean
}

const tokenCases: fc.Arbitrary<TokenCase> = fc.record({
  credentials,
  params: fc.tuple(grantParams, scopeParams, bodyCredentialParams).chain(([g, s, c]) => fc.shuffledSubarray([...g, ...s, ...c], { minLength: g.length + s.length + c.length })),
  extra: unknownParams,
  raw: fc.boolean(),
  contentType: contentTypes,
  jsonBody: fc.boolean()
}).map((c) => ({ ...c, jsonBody: c.jsonBody && c.contentType === "application/json" }))

const requestToken = (c: TokenCase, extra: ReadonlyArray<Param> = c.extra) => {
  const all = [...c.params, ...extra]
  const body = c.jsonBody ? JSON.stringify(Object.fromEntries(all)) : serialise(all, c.raw)
  const headers: Array<[string, string]> = []
  if (c.contentType !== undefined) headers.push(["Content-Type", c.contentType])
  if (c.credentials.header !== undefined) headers.push(["Authorization", c.credentials.header])
  // Raw bytes: Authorization values with odd Unicode must reach the server as sent.
  const lines = headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")
  const bytes = Buffer.concat([
    Buffer.from(`POST /oauth/token HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`),
    Buffer.from(lines, "utf8"),
    Buffer.from(`\r\n${body}`)
  ])
  return { checked: target.exchangeBytes(bytes, { method: "POST", target: "/oauth/token", parserMayRefuse: true }), body }
}

const describeCase = (c: TokenCase, body: string) =>
  `POST /oauth/token\nAuthorization: ${c.credentials.header}\nContent-Type: ${c.contentType}\n\n${body}`

describe("POST /oauth/token form variants", () => {
  it("every answer is 200, 400, 401 or 429 with RFC 6749 JSON errors, and a token only for a well-formed grant", async () => {
    await fc.assert(
      fc.asyncProperty(tokenCases, async (c) => {
        const { checked: pending, body } = requestToken(c)
        const checked = await pending
        const context = describeCase(c, body)
        expectNoViolations(checked, context)
        const res = checked.response
        if (res.status === 400 && res.body.length === 0) return // Node refused a control character in a header
        expect([200, 400, 401], context).toContain(res.status)
        const json = jsonOf(res)
        if (res.status === 200) {
          // Issued: good credentials, form body, grant_type exactly client_credentials once, no body
          // credentials but a client_id naming the Basic client (C6).
          expect(c.credentials.good, context).toBe(true)
          expect(c.contentType?.toLowerCase().startsWith("application/x-www-form-urlencoded"), context).toBe(true)
          // The values as the server decodes them (WHATWG form decoding = RFC 6749 Appendix B).
          const form = new URLSearchParams(body)
          const present = (name: string) => form.getAll(name).filter((v) => v !== "")
          expect(present("grant_type"), context).toEqual(["client_credentials"])
          expect(present("client_secret"), context).toEqual([])
          expect(present("client_assertion"), context).toEqual([])
          expect(present("client_id").every((id) => id === ALL.clientId), context).toBe(true)
          const requested = present("scope")
          expect(requested.length, context).toBeLessThanOrEqual(1)
          const granted = String(json.scope).split(" ")
          expect(granted.every((s) => (ALL.scopes as ReadonlyArray<string>).includes(s)), context).toBe(true)
          if (requested.length === 1) expect([...granted].sort(), context).toEqual([...new Set(requested[0]!.split(" "))].sort())
          expect(json.token_type, context).toBe("Bearer")
        }
        if (res.status === 401) {
          expect(json.error, context).toBe("invalid_client")
          expect(res.headers["www-authenticate"], context).toMatch(/^Basic realm="oauth"/)
        }
        if (res.status === 400) expect(["invalid_request", "unsupported_grant_type", "invalid_scope"], context).toContain(json.error)
        // Malformed Basic credentials are a malformed request, not a failed authentication.
        if (c.credentials.header?.startsWith("Basic ") && !c.credentials.basicWellFormed && res.status === 401) {
          expect.fail(`${context}\nmalformed Basic answered 401, expected 400 invalid_request`)
        }
      }),
      fuzzParams(300)
    )
  })

  it("unknown parameters never change the answer (RFC 6749 §3.2)", async () => {
    await fc.assert(
      // Properly form-encoded: a raw unknown value could hold a bad %-escape, which rightly fails the request.
      fc.asyncProperty(tokenCases.filter((c) => !c.jsonBody).map((c) => ({ ...c, raw: false })), unknownParams.filter((p) => p.length > 0), async (c, extra) => {
        const without = requestToken(c, [])
        const withExtra = requestToken(c, extra)
        const [a, b] = [await without.checked, await withExtra.checked]
        const context = `${describeCase(c, without.body)}\nvs\n${withExtra.body}`
        expectNoViolations(a, context)
        expectNoViolations(b, context)
        expect(b.response.status, context).toBe(a.response.status)
        expect(jsonOf(b.response)?.error, context).toBe(jsonOf(a.response)?.error)
      }),
      fuzzParams(100)
    )
  })

  it("a JSON body is not a token request: 400 invalid_request as application/json", async () => {
    const checked = await target.exchange({
      method: "POST",
      path: "/oauth/token",
      headers: [["Content-Type", "application/json"], ["Authorization", `Basic ${b64("svc-all:secret-all")}`]],
      body: JSON.stringify({ grant_type: "client_credentials" })
    })
    expectNoViolations(checked, "JSON token request")
    expect(checked.response.status).toBe(400)
    expect(jsonOf(checked.response).error).toBe("invalid_request")
  })
})
