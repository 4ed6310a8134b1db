/**
 * The specification's rules around every operation, over real HTTP, with fakes behind: request ids, CORS, the access
 * log, optional Bearer tokens on the public operations, and a page at every problem type URI.
 */
import { describe, expect, it } from "vitest"
import { startTestApp, tokenFor } from "../../support/app.ts"
import { expectProblem } from "../../support/problems.ts"
import { app, post, useContractApp } from "./contract-support.ts"

useContractApp()

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
