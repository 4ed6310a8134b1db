/**
 * Every row of the specification's endpoint and error tables, over real HTTP, with fakes behind: the operations and
 * the problems every operation may answer. Every method on every path: contract-methods.test.ts; request ids, CORS,
 * headers, Bearer tokens and the problem type pages: contract-headers.test.ts.
 */
import { request as httpRequest } from "node:http"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { RatesProvider } from "../../../src/rates/RatesProvider.ts"
import { startTestApp } from "../../support/app.ts"
import { expectProblem } from "../../support/problems.ts"
import { app, post, useContractApp } from "./contract-support.ts"

useContractApp()

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
