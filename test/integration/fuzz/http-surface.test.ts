/**
 * Everything around the bodies, fuzzed through the real HTTP app: random methods, path
 * variants (trailing slashes, percent-encoding, case, double slashes, dot segments), odd and oversized
 * headers, and Authorization variants on the public operations. Each answer must satisfy the
 * invariants (support/invariants.ts), and the outcome follows from the route table and RFC 6750.
 *
 * Node's own refusals, documented here because no application code runs for them:
 * - headers over 16 KiB in total (Node's default `maxHeaderSize`) → 431 with no body and no problem;
 * - an unknown method token, a malformed header line or Content-Length, a missing Host, bare-LF line
 *   endings, Content-Length with Transfer-Encoding → 400 with no body (llhttp rejects the request
 *   before it is parsed); two Host fields are accepted (RFC 9112 §3.2 would want 400);
 * - CONNECT → the connection is closed (the server has no 'connect' listener).
 */
import fc from "fast-check"
import { SignJWT, generateKeyPair, exportJWK } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { basic, tokenFor } from "../../support/app.ts"
import { oddUnicode } from "../../support/fuzz/arbitraries.ts"
import { expectNoViolations, type FuzzTarget, fuzzParams, startFuzzTarget } from "../../support/fuzz/harness.ts"
import { jsonOf, resolveTarget } from "../../support/fuzz/invariants.ts"

let target: FuzzTarget
let allScopesToken = ""
let healthOnlyToken = ""
beforeAll(async () => {
  target = await startFuzzTarget()
  allScopesToken = await tokenFor(target.app, "svc-all", "secret-all")
  healthOnlyToken = await tokenFor(target.app, "svc-health", "secret-health")
})
afterAll(() => target.close())

/** A request every operation answers 200 to (anonymous, fakes behind). */
const happyRequest = (path: string, method: string): { headers: Array<[string, string]>; body?: string } => {
  if (method !== "POST") return { headers: [] }
  if (path === "/api/v1/exchange-rates") return { headers: [["Content-Type", "application/json"]], body: '{"cryptos":["BTC"]}' }
  if (path === "/api/subscribe") return { headers: [["Content-Type", "application/json"]], body: '{"email":"paths@example.com","locale":"en"}' }
  if (path === "/oauth/token") {
    return {
      headers: [["Content-Type", "application/x-www-form-urlencoded"], ["Authorization", basic("svc-all", "secret-all")]],
      body: "grant_type=client_credentials"
    }
  }
  return { headers: [] }
}

/**
 * The query a GET needs to be answered 200 (GET /api/v1/rates and the price stream: their `cryptos`), if any. The
 * stream's 200 never ends: the fuzz clients take its head as the answer (support/fuzz/http.ts).
 */
const happyQuery = (path: string): string | undefined => (path === "/api/v1/rates" || path === "/api/v1/prices/stream" ? "cryptos=BTC" : undefined)

/**
 * `target` with the happy query of `path` added: after the target's own query (the router's: from the first `?` or
 * `;`), or as the query.
 */
const withHappyQuery = (target: string, path: string) => {
  const query = happyQuery(path)
  if (query === undefined) return target
  return /[?;]/.test(target) ? `${target}&${query}` : `${target}?${query}`
}

/** Every path the service serves, one concrete URL each, with its methods. */
const knownPaths = (): Array<{ path: string; methods: ReadonlyArray<string> }> => {
  const fromDocument = Object.keys(target.model.doc.paths).map((path) => ({
    path,
    methods: target.model.methodsOf(path).flatMap((m) => (m === "GET" ? ["GET", "HEAD"] : [m]))
  }))
  return [
    ...fromDocument,
    { path: "/openapi.json", methods: ["GET", "HEAD"] },
    { path: "/docs", methods: ["GET", "HEAD"] },
    { path: "/problems/not_found", methods: ["GET", "HEAD"] },
    { path: "/problems", methods: ["GET", "HEAD"] },
    { path: "/livez", methods: ["GET", "HEAD"] },
    { path: "/readyz", methods: ["GET", "HEAD"] }
  ]
}

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND", "LINK", "PURGE", "QUERY", "SEARCH", "LOCK"]

// Every method on every path, one test each: test/unit/http/contract.test.ts.
describe("methods", () => {
  it("random method tokens never reach a 5xx and 405s always carry Allow", async () => {
    const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/)
    await fc.assert(
      fc.asyncProperty(token, fc.constantFrom(...knownPaths().map((p) => p.path), "/x"), async (method, path) => {
        const checked = await target.exchangeBytes(`${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, { method, target: path, parserMayRefuse: true })
        expectNoViolations(checked, `${method} ${path}`)
      }),
      fuzzParams(80)
    )
  })

  it("CONNECT is refused by closing the connection (Node has no CONNECT handler)", async () => {
    const res = await target.exchangeBytes("CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", { method: "CONNECT", target: "/" }).catch((e: unknown) => e)
    expect(res instanceof Error || (res as { response: { status: number } }).response.status === 0).toBe(true)
  })

  it("preflight on a public operation gets 204; OPTIONS without the CORS headers gets 405 with Allow", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...knownPaths()), fc.option(fc.constantFrom("https://a.example", "null", "http://localhost:3000")), fc.option(fc.constantFrom(...METHODS.slice(0, 6))), async ({ path, methods }, origin, requested) => {
        const headers: Array<[string, string]> = []
        if (origin !== null) headers.push(["Origin", origin])
        if (requested !== null) headers.push(["Access-Control-Request-Method", requested])
        const checked = await target.exchange({ method: "OPTIONS", path, headers })
        const context = `OPTIONS ${path} origin=${origin} method=${requested}`
        expectNoViolations(checked, context)
        const isPublic = ["/api/health", "/api/v1/exchange-rates", "/api/v1/rates", "/api/v1/prices/stream", "/api/subscribe"].includes(path)
        const preflight = isPublic && origin !== null && requested !== null && methods.includes(requested)
        expect(checked.response.status, context).toBe(preflight ? 204 : 405)
      }),
      fuzzParams(60)
    )
  })
})

describe("path variants", () => {
  /** Percent-encodes the characters at the chosen positions (upper or lower hex). */
  const encodeAt = (path: string, positions: ReadonlyArray<number>, lower: boolean) =>
    [...path].map((ch, i) => {
      if (!positions.includes(i) || ch === "/") return ch
      const hex = [...Buffer.from(ch, "utf8")].map((b) => "%" + b.toString(16).padStart(2, "0")).join("")
      return lower ? hex.toLowerCase() : hex.toUpperCase()
    }).join("")

  type Variant = { readonly target: string; readonly equivalent: boolean; readonly kind: string }

  const variantOf = (path: string): fc.Arbitrary<Variant> =>
    fc.oneof(
      fc.constant({ target: path, equivalent: true, kind: "canonical" }),
      fc.tuple(fc.uniqueArray(fc.nat({ max: path.length - 1 }), { maxLength: 4 }), fc.boolean()).map(([positions, lower]) => ({
        // RFC 3986 §6.2.2.2: percent-encoded unreserved characters are equivalent to the characters.
        target: encodeAt(path, positions, lower),
        equivalent: true,
        kind: "percent-encoded unreserved"
      })),
      fc.constantFrom(
        { target: `${path}/`, equivalent: false, kind: "trailing slash" },
        { target: `${path}//`, equivalent: false, kind: "double trailing slash" },
        { target: `/${path}`, equivalent: false, kind: "leading double slash" },
        { target: path.replace("/", "//").replace(/^\/\/\//, "//"), equivalent: false, kind: "inner double slash" },
        { target: path.toUpperCase(), equivalent: path === path.toUpperCase(), kind: "upper case" },
        { target: path.replace(/\/([^/]+)$/, "/./$1"), equivalent: false, kind: "dot segment" },
        { target: path.replace(/\/([^/]+)$/, "/x/../$1"), equivalent: false, kind: "dot-dot segment" },
        { target: path.lastIndexOf("/") > 0 ? `${path.slice(0, path.lastIndexOf("/"))}%2F${path.slice(path.lastIndexOf("/") + 1)}` : `${path}%2Fx`, equivalent: false, kind: "encoded slash" },
        { target: `${path}%00`, equivalent: false, kind: "encoded NUL" },
        { target: `${path}%`, equivalent: false, kind: "truncated escape" },
        { target: `${path}%zz`, equivalent: false, kind: "invalid escape" },
        { target: `${path}%C0%AF`, equivalent: false, kind: "overlong UTF-8" },
        // effect's FindMyWay ends the path at ';' as at '?' (router.js): the same resource.
        { target: `${path};jsessionid=1`, equivalent: true, kind: "semicolon parameter" },
        { target: `${path}%20`, equivalent: false, kind: "encoded space" },
        { target: `${path}.json`, equivalent: false, kind: "extension" },
        { target: `${path}?`, equivalent: true, kind: "empty query" },
        { target: `${path}?a=%&b=%zz&%00=\u00e9`.replace("\u00e9", "%C3%A9"), equivalent: true, kind: "odd query" },
        { target: `${path}?${"q".repeat(4_000)}=1`, equivalent: true, kind: "long query" },
        { target: `http://example.test${path}`, equivalent: true, kind: "absolute form" }
      )
    )

  it("equivalent spellings reach the same resource; any other spelling is a 404 problem", async () => {
    const paths = knownPaths()
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...paths).chain((p) => fc.tuple(fc.constant(p), variantOf(p.path), fc.constantFrom(...p.methods, "DELETE"))),
        fc.option(fc.constantFrom("https://app.example", "null")),
        async ([known, variant, method], origin) => {
          const happy = happyRequest(known.path, method)
          // An Origin makes CORS decisions visible (none may be made for /oauth/token, C2).
          const headers = [...happy.headers, ...(origin === null ? [] : [["Origin", origin] as [string, string]])]
          const sent = withHappyQuery(variant.target, known.path)
          const checked = await target.exchange({ method, path: sent, headers, ...(happy.body === undefined ? {} : { body: happy.body }) })
          const context = `${method} ${sent} (${variant.kind} of ${known.path})`
          expectNoViolations(checked, context)
          const status = checked.response.status
          const resolved = resolveTarget(target.model, method, variant.target)
          if (variant.equivalent) expect(status, context).toBe(known.methods.includes(method) ? 200 : 405)
          else if (resolved.allowed !== undefined && !resolved.allowed.includes(method)) {
            // Still inside a template (/problems/{code} takes any code): the method decides first.
            expect(status, context).toBe(405)
          } else if (resolved.pageStatus !== undefined) {
            // Another page's own path (/docs/ redirects to /docs); another spelling of a problem code is no code.
            expect(status, context).toBe(resolved.template?.startsWith("/problems/") === true ? 404 : resolved.pageStatus)
          } else {
            expect(status, context).toBe(404)
            if (method !== "HEAD") expect(jsonOf(checked.response)?.code, context).toBe("not_found")
          }
        }
      ),
      fuzzParams(250)
    )
  })

  it("raw bytes in the request target (spaces, controls, non-ASCII) are refused without a crash", async () => {
    const odd = fc.oneof(
      fc.constantFrom("\u0000", "\t", "\u007f", "\u00ff", "é", "\\", "\"", "<", ">", "^", "`", "{", "|", "}", "#frag"),
      oddUnicode.filter((s) => s.length > 0)
    )
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...knownPaths().map((p) => p.path)), odd, async (path, insert) => {
        const pathWithInsert = path + insert
        const bytes = Buffer.concat([Buffer.from("GET "), Buffer.from(pathWithInsert, "utf8"), Buffer.from(" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")])
        const checked = await target.exchangeBytes(bytes, { method: "GET", target: pathWithInsert, parserMayRefuse: true })
        expectNoViolations(checked, `GET ${JSON.stringify(pathWithInsert)}`)
        // A byte the URL grammar forbids may be refused by Node or answered 404; never served as the path.
        if (checked.response.status === 200) expect(insert, `served ${JSON.stringify(pathWithInsert)}`).toMatch(/^#/)
      }),
      fuzzParams(80)
    )
  })
})

describe("odd and oversized headers", () => {
  const headerName = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,20}$/).filter((n) => !["host", "content-length", "transfer-encoding", "connection", "expect", "upgrade"].includes(n.toLowerCase()))
  const headerValue = fc.oneof(
    fc.string({ maxLength: 40 }).map((s) => s.replace(/[\r\n\u0000]/g, "")),
    fc.constantFrom("", " ", "\t", "a, b", "=?utf-8?q?x?=", "\u00e9\u00ff", "()<>@,;:\\\"/[]?={}")
  )

  it("random extra headers, repeated headers and odd values never change the outcome", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...knownPaths()), fc.array(fc.tuple(headerName, headerValue), { maxLength: 20 }), async (known, extra) => {
        const method = known.methods[0]!
        const happy = happyRequest(known.path, method)
        // Latin-1 values go out as bytes (obs-text): node:http would refuse to send them.
        const lines = [...happy.headers, ...extra].map(([n, v]) => `${n}: ${v}`)
        const body = happy.body ?? ""
        const sent = withHappyQuery(known.path, known.path)
        const bytes = Buffer.concat([
          Buffer.from(`${method} ${sent} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`, "latin1"),
          Buffer.from(lines.map((l) => `${l}\r\n`).join(""), "latin1"),
          Buffer.from("\r\n"),
          Buffer.from(body)
        ])
        const checked = await target.exchangeBytes(bytes, { method, target: sent, parserMayRefuse: true })
        const context = `${method} ${sent} with ${JSON.stringify(extra)}`
        expectNoViolations(checked, context)
        const status = checked.response.status
        // Extra headers may only matter when they name a header the service reads.
        const read = ["authorization", "content-type", "content-encoding", "origin", "x-request-id", "x-forwarded-for", "access-control-request-method"]
        if (!extra.some(([n]) => read.includes(n.toLowerCase()))) expect([200, 400], context).toContain(status)
        if (status === 400) expect(checked.response.body.length, `${context}: only Node's parser may refuse`).toBe(0)
      }),
      fuzzParams(120)
    )
  })

  it("total header size around Node's 16 KiB limit: answered below it, 431 (bodiless, Node's own) above it", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 15_500, max: 17_500 }), fc.integer({ min: 1, max: 8 }), async (total, pieces) => {
        const each = Math.floor(total / pieces)
        const headers = Array.from({ length: pieces }, (_, i) => [`X-Pad-${i}`, "p".repeat(Math.max(1, each - 12))] as [string, string])
        const checked = await target.exchange({ method: "GET", path: "/api/health", headers })
        const size = headers.reduce((n, [k, v]) => n + k.length + v.length + 4, 0)
        const context = `${pieces} headers, ~${size} bytes`
        expectNoViolations(checked, context)
        expect([200, 431], context).toContain(checked.response.status)
        if (checked.response.status === 431) expect(checked.response.body.length, context).toBe(0)
        if (size < 16_000) expect(checked.response.status, context).toBe(200)
        if (size > 16_500) expect(checked.response.status, context).toBe(431)
      }),
      fuzzParams(30)
    )
  })

  it("X-Request-Id: a UUID is echoed (lower-cased), anything else is replaced", async () => {
    const candidates = fc.oneof(fc.uuid().map((u) => ({ v: u, ok: true })), fc.uuid().map((u) => ({ v: u.toUpperCase(), ok: true })), fc.string({ maxLength: 60 }).map((v) => ({ v: v.replace(/[\r\n\u0000]/g, ""), ok: false })))
    await fc.assert(
      fc.asyncProperty(candidates, async ({ v, ok }) => {
        const checked = await target.exchangeBytes(Buffer.from(`GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Request-Id: ${v}\r\n\r\n`, "latin1"), { method: "GET", target: "/nope", parserMayRefuse: true })
        expectNoViolations(checked, `X-Request-Id: ${JSON.stringify(v)}`)
        if (checked.response.status !== 404) return
        const echoed = checked.response.headers["x-request-id"]
        const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v.trim())
        if (ok || isUuid) expect(echoed).toBe(v.trim().toLowerCase())
        else expect(echoed).not.toBe(v)
      }),
      fuzzParams(60)
    )
  })

  it("Node's parser refuses malformed framing with a bare 400 before the app (documented, not a problem body)", async () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["HTTP/1.1 without Host", "GET /api/health HTTP/1.1\r\nConnection: close\r\n\r\n"],
      ["a control character in a header value", "GET /api/health HTTP/1.1\r\nHost: x\r\nX-A: a\u0001b\r\nConnection: close\r\n\r\n"],
      ["bare LF line endings", "GET /api/health HTTP/1.1\nHost: x\nConnection: close\n\n"],
      ["Content-Length and Transfer-Encoding together (smuggling)", "POST /api/v1/exchange-rates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"]
    ]
    for (const [what, bytes] of cases) {
      const checked = await target.exchangeBytes(bytes, { method: bytes.split(" ")[0]!, target: "/api/health", parserMayRefuse: true })
      expectNoViolations(checked, what)
      expect(checked.response.status, what).toBe(400)
      expect(checked.response.body.length, what).toBe(0)
    }
    // RFC 9112 §3.2 wants a 400 for two Host fields; Node accepts them. Pinned here so a change shows;
    // harmless for this service, which does not route by host.
    const twoHosts = await target.exchangeBytes("GET /api/health HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n", { method: "GET", target: "/api/health" })
    expect(twoHosts.response.status).toBe(200)
  })

  it("Content-Length that disagrees or repeats is refused by Node before the app", async () => {
    for (const lengths of [["5", "6"], ["abc"], ["-1"], ["1, 2"], ["99999999999999999999"]]) {
      const bytes = `POST /api/v1/exchange-rates HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n${lengths.map((l) => `Content-Length: ${l}\r\n`).join("")}\r\n{}`
      const checked = await target.exchangeBytes(bytes, { method: "POST", target: "/api/v1/exchange-rates", parserMayRefuse: true })
      expectNoViolations(checked, `Content-Length ${lengths.join(" / ")}`)
      expect([400, 413], `Content-Length ${lengths.join(" / ")}`).toContain(checked.response.status)
    }
  })
})

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
