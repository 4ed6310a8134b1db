/**
 * The fuzz invariants can fail: each check is pointed at a deliberately broken answer and must name
 * the breakage, while the untouched answer passes. Without this, a property that never trips would
 * look exactly like a green fuzz run.
 */
import { createServer } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ProblemCatalogue } from "../../../src/api/problems.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { BASE } from "../../support/problems.ts"
import { type RawResponse, send } from "../../support/fuzz/http.ts"
import { type Exchange, violationsOf } from "../../support/fuzz/invariants.ts"
import { loadOpenApi, type OpenApiModel } from "../../support/fuzz/openapi.ts"

let app: TestApp
let model: OpenApiModel
beforeAll(async () => {
  app = await startTestApp()
  model = loadOpenApi(await (await fetch(`${app.url}/openapi.json`)).json())
})
afterAll(() => app.close())

const REQUEST_ID = "0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a60"

const response = (status: number, headers: Record<string, string>, body: unknown): RawResponse => {
  const text = typeof body === "string" ? body : JSON.stringify(body)
  return {
    status,
    headers: { "x-request-id": REQUEST_ID, "x-content-type-options": "nosniff", ...headers },
    headerLines: [],
    body: Buffer.from(text),
    text,
    elapsedMs: 1
  }
}

const problem = (status: number, code: string, extra: Record<string, unknown> = {}) => ({
  type: `${BASE}/problems/${code}`,
  title: (ProblemCatalogue as Record<string, { title: string }>)[code]?.title ?? "t",
  status,
  detail: "d",
  instance: `urn:uuid:${REQUEST_ID}`,
  code,
  resolution: "r",
  ...extra
})

const exchange = (method: string, target: string, res: RawResponse, extra: Partial<Exchange> = {}): Exchange => ({
  method,
  target,
  sent: `${method} ${target}`,
  response: res,
  ...extra
})

const check = (ex: Exchange) => violationsOf(model, BASE, ex)

const goodHealth = { status: "healthy", timestamp: "2026-11-22T10:00:00.000Z", uptime: 1.5, environment: "test" }
const json = { "content-type": "application/json" }
const problemJson = { "content-type": "application/problem+json" }

describe("each invariant trips on a broken answer", () => {
  it("control: well-formed answers have no violations", () => {
    expect(check(exchange("GET", "/api/health", response(200, json, goodHealth)))).toEqual([])
    expect(check(exchange("DELETE", "/api/health", response(405, { ...problemJson, allow: "GET, HEAD" }, problem(405, "method_not_allowed"))))).toEqual([])
    expect(check(exchange("GET", "/api/health", response(401, { ...problemJson, "www-authenticate": "Bearer" }, problem(401, "invalid_token"))))).toEqual([])
  })

  const cases: Array<[string, Exchange, RegExp]> = [
    ["a 500", exchange("GET", "/api/health", response(500, problemJson, problem(500, "internal_error"))), /500/],
    ["an undeclared status", exchange("GET", "/api/health", response(418, problemJson, problem(418, "teapot"))), /neither declared/],
    ["a 2xx body off the schema", exchange("GET", "/api/health", response(200, json, { ...goodHealth, uptime: -1 })), /does not match the document/],
    ["a 2xx with an extra member where none is allowed", exchange("GET", "/api/health", response(200, json, { ...goodHealth, debug: true })), /additional properties/],
    ["a wrong success media type", exchange("GET", "/api/health", response(200, { "content-type": "text/plain" }, goodHealth)), /Content-Type/],
    ["an error as application/json", exchange("GET", "/nope", response(404, json, problem(404, "not_found"))), /problem\+json/],
    ["a problem status differing from HTTP", exchange("GET", "/nope", response(404, problemJson, problem(400, "not_found"))), /differs from HTTP/],
    ["a problem without resolution", exchange("GET", "/nope", response(404, problemJson, { ...problem(404, "not_found"), resolution: undefined })), /resolution/],
    ["a problem type not matching its code", exchange("GET", "/nope", response(404, problemJson, { ...problem(404, "not_found"), type: "about:blank" })), /problem type/],
    ["a problem instance not the request id", exchange("GET", "/nope", response(404, problemJson, { ...problem(404, "not_found"), instance: "urn:uuid:other" })), /instance/],
    ["a stack trace", exchange("GET", "/nope", response(404, problemJson, problem(404, "not_found", { detail: "TypeError: x\n    at f (/app/src/x.ts:3:1)" }))), /internals/],
    ["a node_modules path", exchange("GET", "/nope", response(404, problemJson, problem(404, "not_found", { detail: "/app/node_modules/x" }))), /node_modules/],
    ["a 405 without Allow", exchange("DELETE", "/api/health", response(405, problemJson, problem(405, "method_not_allowed"))), /without Allow/],
    ["a 405 with the wrong Allow", exchange("DELETE", "/api/health", response(405, { ...problemJson, allow: "GET" }, problem(405, "method_not_allowed"))), /Allow is "GET"/],
    ["a 401 without WWW-Authenticate", exchange("GET", "/api/health", response(401, problemJson, problem(401, "invalid_token"))), /WWW-Authenticate/],
    ["a 429 without Retry-After", exchange("GET", "/api/health", response(429, problemJson, problem(429, "rate_limited"))), /Retry-After/],
    ["no X-Request-Id", exchange("GET", "/api/health", { ...response(200, json, goodHealth), headers: { ...json, "x-content-type-options": "nosniff" } }), /X-Request-Id/],
    ["no nosniff", exchange("GET", "/api/health", { ...response(200, json, goodHealth), headers: { ...json, "x-request-id": REQUEST_ID } }), /nosniff/],
    ["a HEAD with a body", exchange("HEAD", "/api/health", response(200, json, goodHealth)), /HEAD answered/],
    ["a token error as problem+json", exchange("POST", "/oauth/token", response(400, problemJson, problem(400, "invalid_request", { error: "invalid_request", error_description: "x" }))), /application\/json/],
    ["a token error without `error`", exchange("POST", "/oauth/token", response(400, json, problem(400, "invalid_request", { error_description: "x" }))), /OAuth error member/],
    ["a token 200 without no-store", exchange("POST", "/oauth/token", response(200, json, { access_token: "a", token_type: "Bearer", expires_in: 900, scope: "health:read" })), /no-store/],
    ["CORS on the token endpoint", exchange("POST", "/oauth/%74oken", response(200, { ...json, "cache-control": "no-store", pragma: "no-cache", "access-control-allow-origin": "*" }, { access_token: "a", token_type: "Bearer", expires_in: 900, scope: "health:read" })), /CORS/],
    ["a bare 400 where the parser was not expected to refuse", exchange("GET", "/api/health", { ...response(400, {}, ""), headers: {} }), /X-Request-Id|Content-Type/],
    ["no answer at all", exchange("GET", "/api/health", { ...response(0, {}, ""), status: 0 }), /no HTTP answer/]
  ]
  it.each(cases)("%s", (_name, ex, expected) => {
    const violations = check(ex)
    expect(violations.join("\n")).toMatch(expected)
  })

  it("markers the client itself sent (echoed in a detail) are not counted as internals", () => {
    const echoed = exchange("POST", "/api/subscribe", response(415, { ...problemJson, accept: "application/json" }, problem(415, "unsupported_media_type", { detail: "Content-Type TypeError: x is not supported" })), { sent: "Content-Type: TypeError: x" })
    expect(check(echoed)).toEqual([])
  })
})

describe("the whole pipeline (raw client + oracle) flags a broken server", () => {
  it("a server answering 500 with a stack trace and no problem members is reported", async () => {
    const broken = createServer((_req, res) => {
      res.writeHead(500, { "content-type": "text/plain" })
      res.end("Error: boom\n    at handler (/srv/node_modules/app/index.js:1:1)")
    })
    await new Promise<void>((r) => broken.listen(0, "127.0.0.1", r))
    const port = (broken.address() as { port: number }).port
    try {
      const res = await send(`http://127.0.0.1:${port}`, { method: "GET", path: "/api/health" })
      const violations = check(exchange("GET", "/api/health", res))
      expect(violations.join("\n")).toMatch(/500/)
      expect(violations.join("\n")).toMatch(/problem\+json/)
      expect(violations.join("\n")).toMatch(/internals/)
      expect(violations.join("\n")).toMatch(/X-Request-Id/)
    } finally {
      await new Promise<void>((r) => broken.close(() => r()))
    }
  })
})
