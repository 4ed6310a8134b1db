/**
 * The served OpenAPI document: valid OpenAPI 3.1, the spec's operation ids, versions and statuses,
 * and the ProblemDetails schema of spec §2.
 */
import { Validator } from "@seriousme/openapi-schema-validator"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { BASE } from "../../support/problems.ts"

let app: TestApp
let doc: any
beforeAll(async () => {
  app = await startTestApp()
  doc = await (await fetch(`${app.url}/openapi.json`)).json()
})
afterAll(() => app.close())

const op = (path: string, method: string) => doc.paths[path][method]

describe("GET /openapi.json", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    const result = await new Validator().validate(doc)
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(doc.openapi).toMatch(/^3\.1\./)
    expect(doc.info.version).toBe("1.0.0")
  })

  it("names the three operations as the specification does", () => {
    expect(op("/api/health", "get").operationId).toBe("getHealth")
    expect(op("/api/v1/exchange-rates", "post").operationId).toBe("getHistoricalExchangeRates")
    expect(op("/api/subscribe", "post").operationId).toBe("subscribeToUpdates")
  })

  it("declares them usable anonymously (empty security) or with their scope", () => {
    // Health ignores tokens (C3): anonymous only.
    expect(op("/api/health", "get").security).toEqual([{}])
    expect(op("/api/v1/exchange-rates", "post").security).toEqual([{}, { oauth2: ["rates:read"] }])
    expect(op("/api/subscribe", "post").security).toEqual([{}, { oauth2: ["subscriptions:write"] }])
    expect(doc.components.securitySchemes.oauth2.flows.clientCredentials.tokenUrl).toBe("/oauth/token")
  })

  it("lists the statuses of the specification's error table per operation", () => {
    const statuses = (path: string, method: string) => Object.keys(op(path, method).responses)
    // C3: health lists exactly the specification's 200 and 405.
    expect(statuses("/api/health", "get").sort()).toEqual(["200", "405"])
    expect(statuses("/api/v1/exchange-rates", "post")).toEqual(
      expect.arrayContaining(["200", "400", "405", "500", "502", "503"])
    )
    expect(statuses("/api/subscribe", "post")).toEqual(expect.arrayContaining(["200", "400", "405", "502"]))
    for (const [path, method] of [["/api/health", "get"], ["/api/v1/exchange-rates", "post"], ["/api/subscribe", "post"]]) {
      const r = op(path!, method!).responses
      expect(r["405"].headers.Allow).toBeDefined()
      for (const [status, response] of Object.entries<any>(r)) {
        if (Number(status) >= 400) expect(Object.keys(response.content)).toEqual(["application/problem+json"])
      }
    }
  })

  it("has the request schemas of spec §2", () => {
    const s = doc.components.schemas
    expect(s.ExchangeRatesRequest.required).toEqual(["cryptos"])
    expect(s.ExchangeRatesRequest.properties.cryptos.minItems).toBe(1)
    expect(s.ExchangeRatesRequest.properties.cryptos.items).toMatchObject({ minLength: 1, pattern: "^[A-Za-z0-9._-]+$" })
    expect(s.ExchangeRatesRequest.additionalProperties).not.toBe(false)
    expect(s.SubscribeRequest.additionalProperties).toBe(false)
    expect(s.SubscribeRequest.properties.locale.enum).toEqual(["es", "en", "fr", "it", "pt"])
    expect(JSON.stringify(s.SubscribeRequest.properties.email)).toContain("\"format\":\"email\"")
    expect(s.HealthResponse.required).toEqual(["status", "timestamp", "uptime", "environment"])
  })

  it("describes every problem with code and resolution required, types absolute", () => {
    const s = doc.components.schemas
    expect(s.ProblemDetails.required).toEqual(["type", "title", "status", "detail", "code", "resolution"])
    expect(s.ProblemDetails.properties.code.pattern).toBe("^[a-z0-9_]+$")
    expect(s.UpstreamError.required).toEqual(expect.arrayContaining(["code", "resolution", "status", "title", "detail"]))
    expect(s.UpstreamError.properties.type.enum).toEqual([`${BASE}/problems/upstream_error`])
  })
})
