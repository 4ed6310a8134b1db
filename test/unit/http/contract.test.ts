/**
 * Every row of the specification's endpoint and error tables, over real HTTP, with fakes behind.
 */
import { request as httpRequest } from "node:http"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RatesProvider } from "../../../src/rates/RatesProvider.ts"
import { basic, startTestApp, type TestApp, tokenFor } from "../../support/app.ts"
import { expectNoViolations, type FuzzTarget, startFuzzTarget } from "../../support/fuzz/harness.ts"
import { resolveTarget } from "../../support/fuzz/invariants.ts"
import { expectProblem } from "../../support/problems.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(app.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

describe("GET /api/health", () => {
  it("answers the HealthResponse with no-store", async () => {
    const res = await fetch(`${app.url}/api/health`, { headers: { accept: "application/json" } })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^application\/json/)
    expect(res.headers.get("cache-control")).toBe("no-store")
    const body = await res.json()
    expect(Object.keys(body).sort()).toEqual(["environment", "status", "timestamp", "uptime"])
    expect(body.status).toBe("healthy")
    expect(new Date(body.timestamp).toISOString()).toBe(body.timestamp)
    expect(body.uptime).toBeGreaterThanOrEqual(0)
    expect(body.environment).toBe("development")
  })

  it("answers HEAD like GET without a body", async () => {
    const res = await fetch(`${app.url}/api/health`, { method: "HEAD" })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^application\/json/)
    expect(await res.text()).toBe("")
  })

  it("uptime grows", async () => {
    const a = (await (await fetch(`${app.url}/api/health`)).json()).uptime
    await new Promise((r) => setTimeout(r, 30))
    const b = (await (await fetch(`${app.url}/api/health`)).json()).uptime
    expect(b).toBeGreaterThan(a)
  })
})

describe("POST /api/v1/exchange-rates", () => {
  it("returns rates in request order, upper-cased and de-duplicated", async () => {
    const res = await post("/api/v1/exchange-rates", { cryptos: ["eth", "BTC", "Eth"] })
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body.rates.map((r: { symbol: string }) => r.symbol)).toEqual(["ETH", "BTC"])
    expect(body).toMatchObject({ currency: "USD", days: 30, interval: "daily", unknown: [], stale: false })
    expect(body.rates[0].series).toHaveLength(30)
  })

  it("lists unknown symbols beside known ones (200)", async () => {
    const body = await (await post("/api/v1/exchange-rates", { cryptos: ["BTC", "FOO"] })).json()
    expect(body.rates.map((r: { symbol: string }) => r.symbol)).toEqual(["BTC"])
    expect(body.unknown).toEqual(["FOO"])
    const longest = await (await post("/api/v1/exchange-rates", { cryptos: ["BTC", "Y".repeat(32)] })).json()
    expect(longest.unknown).toEqual(["Y".repeat(32)])
  })

  it("honours currency and days, and ignores other extra members", async () => {
    const res = await post("/api/v1/exchange-rates", { cryptos: ["SOL"], currency: "EUR", days: 7, note: "x" })
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body).toMatchObject({ currency: "EUR", days: 7 })
    expect(body.rates[0].series).toHaveLength(7)
  })

  it("400 no_valid_symbols when none is known, naming them", async () => {
    const body = await expectProblem(await post("/api/v1/exchange-rates", { cryptos: ["FOO", "BAR"] }), 400, "no_valid_symbols")
    expect(body.unknown).toEqual(["FOO", "BAR"])
  })

  it.each([
    ["an empty list", { cryptos: [] }, "/cryptos"],
    ["a missing list", {}, "/cryptos"],
    ["a symbol with a space", { cryptos: ["BTC", "B C"] }, "/cryptos/1"],
    ["an empty symbol", { cryptos: [""] }, "/cryptos/0"],
    ["a symbol over 32 characters (the document's maxLength)", { cryptos: ["BTC", "X".repeat(33)] }, "/cryptos/1"],
    ["a currency over 10 characters", { cryptos: ["BTC"], currency: "a".repeat(11) }, "/currency"],
    ["a number symbol", { cryptos: [42] }, "/cryptos/0"],
    ["51 symbols", { cryptos: Array.from({ length: 51 }, (_, i) => `S${i}`) }, "/cryptos"],
    ["days 0", { cryptos: ["BTC"], days: 0 }, "/days"],
    ["days 366", { cryptos: ["BTC"], days: 366 }, "/days"],
    ["days 1.5", { cryptos: ["BTC"], days: 1.5 }, "/days"],
    ["an unsupported currency", { cryptos: ["BTC"], currency: "xyz" }, "/currency"],
    ["an array body", [1, 2], ""],
    ["a null body", null, ""]
  ])("400 validation_failed for %s, with a JSON Pointer", async (_, body, pointer) => {
    const problem = await expectProblem(await post("/api/v1/exchange-rates", body), 400, "validation_failed")
    const errors = problem.errors as Array<{ pointer: string; detail: string }>
    expect(errors.map((e) => e.pointer)).toContain(pointer)
  })

  it("502 upstream_error when the provider fails", async () => {
    await expectProblem(await post("/api/v1/exchange-rates", { cryptos: ["DOWN"] }), 502, "upstream_error")
  })

  it("503 service_unavailable with Retry-After when the provider is busy", async () => {
    const res = await post("/api/v1/exchange-rates", { cryptos: ["BUSY"] })
    expect(res.headers.get("retry-after")).toBe("30")
    const body = await expectProblem(res, 503, "service_unavailable")
    expect(body.retryAfter).toBe(30)
  })
})

describe("POST /api/subscribe", () => {
  it("200 success for every locale, and again for the same address", async () => {
    for (const locale of ["es", "en", "fr", "it", "pt"]) {
      const res = await post("/api/subscribe", { email: `reader.${locale}@example.com`, locale })
      expect(res.status).toBe(200)
      expect(await res.json()).toEqual({ success: true })
    }
    const again = await post("/api/subscribe", { email: "reader.es@example.com", locale: "es" })
    expect(await again.json()).toEqual({ success: true })
  })

  it.each([
    ["a missing email", { locale: "en" }, "/email"],
    ["a missing locale", { email: "a@example.com" }, "/locale"],
    ["an unknown locale", { email: "a@example.com", locale: "de" }, "/locale"],
    ["an extra member", { email: "a@example.com", locale: "en", name: "x" }, "/name"],
    ["an address without TLD", { email: "a@localhost", locale: "en" }, "/email"],
    ["a display name", { email: "A <a@example.com>", locale: "en" }, "/email"],
    ["an IP-literal domain", { email: "a@[127.0.0.1]", locale: "en" }, "/email"],
    ["an address over 254 characters", { email: `${"a".repeat(64)}@${"b".repeat(200)}.com`, locale: "en" }, "/email"],
    ["a non-string email", { email: 5, locale: "en" }, "/email"]
  ])("400 validation_failed for %s", async (_, body, pointer) => {
    const problem = await expectProblem(await post("/api/subscribe", body), 400, "validation_failed")
    expect((problem.errors as Array<{ pointer: string }>).map((e) => e.pointer)).toContain(pointer)
  })

  it("400 invalid_email when the provider calls the address invalid", async () => {
    await expectProblem(await post("/api/subscribe", { email: "invalid@example.com", locale: "en" }), 400, "invalid_email")
  })

  it("502 upstream_error when the provider fails", async () => {
    await expectProblem(await post("/api/subscribe", { email: "down@example.com", locale: "en" }), 502, "upstream_error")
  })
})

describe("cross-cutting problems", () => {
  it("400 malformed_json", async () => {
    await expectProblem(await post("/api/v1/exchange-rates", "{\"cryptos\": [\"BTC\""), 400, "malformed_json")
    await expectProblem(await post("/api/subscribe", "nope"), 400, "malformed_json")
  })

  it("415 for a non-JSON content type, JSON with charset accepted", async () => {
    const res = await post("/api/v1/exchange-rates", "cryptos=BTC", { "content-type": "text/plain" })
    await expectProblem(res, 415, "unsupported_media_type")
    const ok = await post("/api/v1/exchange-rates", { cryptos: ["BTC"] }, { "content-type": "application/json; charset=utf-8" })
    expect(ok.status).toBe(200)
  })

  it("413 for a declared body over 16 KiB", async () => {
    const big = JSON.stringify({ cryptos: ["BTC"], pad: "x".repeat(17 * 1024) })
    await expectProblem(await post("/api/v1/exchange-rates", big), 413, "payload_too_large")
  })

  it("413 for a chunked body that grows past 16 KiB", async () => {
    const { status, headers, body } = await new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
      (resolve, reject) => {
        const url = new URL(`${app.url}/api/v1/exchange-rates`)
        const req = httpRequest(
          { host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { "content-type": "application/json" } },
          (res) => {
            let text = ""
            res.on("data", (c) => (text += c))
            res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }))
          }
        )
        req.on("error", reject)
        req.write("{\"cryptos\": [\"BTC\"], \"pad\": \"")
        for (let i = 0; i < 40; i++) req.write("x".repeat(1024))
        req.end("\"}")
      }
    )
    expect(status).toBe(413)
    expect(headers["content-type"]).toMatch(/^application\/problem\+json/)
    expect(JSON.parse(body)).toMatchObject({ status: 413, code: "payload_too_large" })
  })

  it("404 not_found for unknown paths and path variants", async () => {
    for (const path of ["/nope", "/api/health/", "/API/health", "/api/v2/exchange-rates", "/api/%68ealth/x", "/problems/nope"]) {
      await expectProblem(await fetch(app.url + path), 404, "not_found")
    }
  })

  it("500 internal_error for a defect, logged, with no internals on the wire", async () => {
    const failing = Layer.succeed(RatesProvider)({
      historical: () => Effect.die(new Error("secret internal detail at /srv/app.ts:12")),
      latestPrices: () => Effect.die(new Error("secret internal detail at /srv/app.ts:12"))
    })
    const broken = await startTestApp({ rates: failing })
    try {
      const res = await fetch(`${broken.url}/api/v1/exchange-rates`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ cryptos: ["BTC"] })
      })
      const body = await expectProblem(res, 500, "internal_error")
      expect(JSON.stringify(body)).not.toContain("secret internal detail")
      expect(broken.logs.at(-1)).toMatchObject({ status: 500, path: "/api/v1/exchange-rates" })
    } finally {
      await broken.close()
    }
  })
})

/**
 * The one method matrix: every path the service serves (the served OpenAPI document's, the documents, the probes, the
 * redirects) and two it does not, by every method Node's parser takes, each pair a test. Sent as raw HTTP (fetch refuses
 * TRACE) by the fuzz harness, which checks each answer against its invariants too (test/support/fuzz/invariants.ts).
 */
describe("every method on every path", () => {
  const routes: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["/api/health", ["GET", "HEAD"]],
    ["/api/v1/exchange-rates", ["POST"]],
    ["/api/v1/rates", ["GET", "HEAD"]],
    ["/api/v1/prices/stream", ["GET", "HEAD"]],
    ["/api/subscribe", ["POST"]],
    ["/oauth/token", ["POST"]],
    ["/.well-known/oauth-authorization-server", ["GET", "HEAD"]],
    ["/.well-known/jwks.json", ["GET", "HEAD"]],
    ["/openapi.json", ["GET", "HEAD"]],
    ["/docs", ["GET", "HEAD"]],
    ["/docs/", ["GET", "HEAD"]],
    ["/", ["GET", "HEAD"]],
    ["/favicon.ico", ["GET", "HEAD"]],
    ["/problems", ["GET", "HEAD"]],
    ["/problems/not_found", ["GET", "HEAD"]],
    ["/livez", ["GET", "HEAD"]],
    ["/readyz", ["GET", "HEAD"]],
    ["/nope", []],
    ["/api", []]
  ]
  /** RFC 9110's methods, then others Node's parser knows: a refusal by the parser (bare 400) is allowed for those only. */
  const standard = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
  const methods = [...standard, "TRACE", "PROPFIND", "LINK", "PURGE", "QUERY", "SEARCH", "LOCK"]

  let target: FuzzTarget
  beforeAll(async () => {
    target = await startFuzzTarget()
  })
  afterAll(() => target.close())

  /** A request every operation answers 200 to (anonymous, fakes behind); a body on any other method but GET and HEAD. */
  const requestFor = (path: string, method: string): { headers: Array<[string, string]>; body?: string } => {
    if (method === "GET" || method === "HEAD") return { headers: [] }
    if (method !== "POST") return { headers: [["Content-Type", "text/plain;charset=UTF-8"]], body: "{}" }
    if (path === "/api/v1/exchange-rates") return { headers: [["Content-Type", "application/json"]], body: '{"cryptos":["BTC"]}' }
    if (path === "/api/subscribe") return { headers: [["Content-Type", "application/json"]], body: '{"email":"paths@example.com","locale":"en"}' }
    if (path === "/oauth/token") {
      return {
        headers: [["Content-Type", "application/x-www-form-urlencoded"], ["Authorization", basic("svc-all", "secret-all")]],
        body: "grant_type=client_credentials"
      }
    }
    return { headers: [["Content-Type", "text/plain;charset=UTF-8"]], body: "{}" }
  }

  it("names every path of the served OpenAPI document with its methods", () => {
    for (const path of Object.keys(target.model.doc.paths)) {
      const declared = target.model.methodsOf(path).flatMap((m) => (m === "GET" ? ["GET", "HEAD"] : [m]))
      expect(routes, path).toContainEqual([path, declared])
    }
  })

  for (const [path, allowed] of routes) {
    for (const method of methods) {
      const outcome = allowed.length === 0 ? "404" : allowed.includes(method) ? "answered" : `405 with Allow: ${allowed.join(", ")}`
      it(`${method} ${path} → ${outcome}`, async () => {
        const request = requestFor(path, method)
        // The GET of the rates needs its query to be answered (the path is the same either way).
        // The price stream's 200 never ends: an unknown symbol's 400, refused by the operation, shows the method is its.
        const sent = path === "/api/v1/rates" ? `${path}?cryptos=BTC` : path === "/api/v1/prices/stream" ? `${path}?cryptos=NOPE` : path
        const checked = await target.exchange({ method, path: sent, ...request, parserMayRefuse: !standard.includes(method) })
        const context = `${method} ${path}`
        expectNoViolations(checked, context)
        const { status, headers, body } = checked.response
        if (allowed.length === 0) return void expect([404, 400], context).toContain(status)
        if (allowed.includes(method)) {
          return void expect(status, context).toBe(path === "/api/v1/prices/stream" ? 400 : resolveTarget(target.model, method, path).pageStatus ?? 200)
        }
        // Only Node's parser may refuse, bodiless, a method it knows but RFC 9110 does not define.
        if (!standard.includes(method) && status === 400 && body.length === 0) return
        expect(status, context).toBe(405)
        expect(headers.allow, context).toBe(allowed.join(", "))
        if (method === "HEAD") return void expect(body.length, context).toBe(0)
        const res = new Response(checked.response.text, { status, headers })
        if (path !== "/oauth/token") return void await expectProblem(res, 405, "method_not_allowed")
        // C6: the token endpoint's errors are OAuth JSON, the problem members included.
        expect(res.headers.get("content-type")).toBe("application/json")
        expect(await res.json()).toMatchObject({ error: "invalid_request", code: "method_not_allowed", status: 405 })
      })
    }
  }
})

describe("request ids, CORS and headers", () => {
  it("echoes a well-formed X-Request-Id and uses it as the problem instance", async () => {
    const id = "0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a69"
    const res = await fetch(`${app.url}/nope`, { headers: { "x-request-id": id } })
    expect(res.headers.get("x-request-id")).toBe(id)
    expect((await res.json()).instance).toBe(`urn:uuid:${id}`)
  })

  it("replaces a malformed X-Request-Id", async () => {
    const res = await fetch(`${app.url}/api/health`, { headers: { "x-request-id": "<script>" } })
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
  })

  it("answers a CORS preflight on a public operation with 204", async () => {
    const res = await fetch(`${app.url}/api/v1/exchange-rates`, {
      method: "OPTIONS",
      headers: { origin: "https://www.example.com", "access-control-request-method": "POST", "access-control-request-headers": "content-type" }
    })
    expect(res.status).toBe(204)
    expect(res.headers.get("access-control-allow-origin")).toBe("*")
    expect(res.headers.get("access-control-allow-methods")).toBe("POST")
    expect(res.headers.get("access-control-allow-headers")).toMatch(/Content-Type/)
  })

  it("exposes headers on CORS responses, errors included, but never on /oauth/token", async () => {
    const res = await post("/api/v1/exchange-rates", { cryptos: ["DOWN"] }, { origin: "https://www.example.com" })
    expect(res.headers.get("access-control-allow-origin")).toBe("*")
    expect(res.headers.get("access-control-expose-headers")).toMatch(/X-Request-Id/)
    const token = await fetch(`${app.url}/oauth/token`, { method: "POST", headers: { origin: "https://www.example.com" } })
    expect(token.headers.get("access-control-allow-origin")).toBeNull()
    const preflight = await fetch(`${app.url}/oauth/token`, {
      method: "OPTIONS",
      headers: { origin: "https://www.example.com", "access-control-request-method": "POST" }
    })
    expect(preflight.status).toBe(405)
  })

  it("refuses a preflight from an origin not in CORS_ORIGINS", async () => {
    const strict = await startTestApp({ env: { CORS_ORIGINS: "https://good.example" } })
    try {
      const ok = await fetch(`${strict.url}/api/subscribe`, {
        method: "OPTIONS",
        headers: { origin: "https://good.example", "access-control-request-method": "POST" }
      })
      expect(ok.status).toBe(204)
      expect(ok.headers.get("access-control-allow-origin")).toBe("https://good.example")
      const bad = await fetch(`${strict.url}/api/subscribe`, {
        method: "OPTIONS",
        headers: { origin: "https://evil.example", "access-control-request-method": "POST" }
      })
      expect(bad.status).toBe(405)
      expect(bad.headers.get("access-control-allow-origin")).toBeNull()
    } finally {
      await strict.close()
    }
  })

  it("writes one access-log line per request with no body or credentials", async () => {
    const before = app.logs.length
    await post("/api/subscribe", { email: "canary-user@example.com", locale: "en" }, { authorization: "Bearer canarytoken123" })
    const line = app.logs.slice(before)
    expect(line).toHaveLength(1)
    expect(line[0]).toMatchObject({ method: "POST", path: "/api/subscribe", status: 401 })
    expect(JSON.stringify(line)).not.toMatch(/canary/)
  })
})

describe("optional Bearer tokens on the public operations", () => {
  it("401 invalid_token with a Bearer challenge for a bad token", async () => {
    const res = await post("/api/v1/exchange-rates", { cryptos: ["BTC"] }, { authorization: "Bearer not.a.token" })
    expect(res.headers.get("www-authenticate")).toBe(`Bearer realm="api", error="invalid_token"`)
    await expectProblem(res, 401, "invalid_token")
    // Health ignores Authorization (C3): a probe never gets 401.
    expect((await fetch(`${app.url}/api/health`, { headers: { authorization: "Bearer not.a.token" } })).status).toBe(200)
  })

  it("403 insufficient_scope naming the scope", async () => {
    const token = await tokenFor(app, "svc-health", "secret-health")
    const res = await post("/api/v1/exchange-rates", { cryptos: ["BTC"] }, { authorization: `Bearer ${token}` })
    expect(res.headers.get("www-authenticate")).toBe(`Bearer realm="api", error="insufficient_scope", scope="rates:read"`)
    await expectProblem(res, 403, "insufficient_scope")
  })

  it("200 with a token carrying the scope", async () => {
    const token = await tokenFor(app, "svc-all", "secret-all")
    for (const [path, body] of [["/api/v1/exchange-rates", { cryptos: ["BTC"] }], ["/api/subscribe", { email: "t@example.com", locale: "en" }]] as const) {
      expect((await post(path, body, { authorization: `Bearer ${token}` })).status).toBe(200)
    }
    expect((await fetch(`${app.url}/api/health`, { headers: { authorization: `bearer ${token}` } })).status).toBe(200)
  })
})

describe("problem type pages", () => {
  it("documents every problem type the service emits at its type URI", async () => {
    const { problemCodes } = await import("../../../src/api/problems.ts")
    for (const code of [...problemCodes, "invalid_request", "invalid_client", "unsupported_grant_type", "invalid_scope"]) {
      const res = await fetch(`${app.url}/problems/${code}`)
      expect(res.status, code).toBe(200)
      expect(res.headers.get("content-type")).toMatch(/^text\/html/)
      expect(await res.text()).toContain(`<code>${code}</code>`)
    }
  })
})
