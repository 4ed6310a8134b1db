/**
 * The served /openapi.json under standard linters (issue 23.2): no error and no warning under Redocly's
 * `recommended` rules and Spectral's `spectral:oas`; under Spectral's OWASP ruleset, the response headers the
 * service sends are declared, request strings are bounded and integers have a format.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { redoclyRecommended, spectralOas, spectralOwasp, tally } from "../../support/openapiLint.ts"

let app: TestApp
let doc: any
beforeAll(async () => {
  app = await startTestApp({ env: { PUBLIC_BASE_URL: "https://rates.example.test" } })
  doc = await (await fetch(`${app.url}/openapi.json`)).json()
})
afterAll(() => app.close())

describe("GET /openapi.json under standard linters", () => {
  it("passes Redocly's recommended rules: 0 errors, 0 warnings", async () => {
    const findings = await redoclyRecommended(doc)
    console.log(`redocly recommended: ${JSON.stringify(tally(findings))}`)
    expect(findings).toEqual([])
  }, 30_000)

  it("passes Spectral's spectral:oas: 0 errors, 0 warnings", async () => {
    const findings = await spectralOas(doc)
    console.log(`spectral:oas: ${JSON.stringify(tally(findings))}`)
    expect(findings).toEqual([])
  }, 30_000)

  it("under OWASP: integers have a format, request strings a bound, limited answers their RateLimit fields", async () => {
    const findings = await spectralOwasp(doc)
    console.log(`spectral owasp: ${JSON.stringify(tally(findings))}`)
    const at = (rule: string, path: RegExp) => findings.filter((f) => f.rule === `owasp:api4:2023-${rule}` && path.test(f.path))
    expect(at("integer-format", /./)).toEqual([])
    expect(at("rate-limit-retry-after", /./)).toEqual([])
    expect(at("string-limit", /^#\/components\/schemas\/(ExchangeRatesRequest|SubscribeRequest)\//)).toEqual([])
    // The limited operations: every answer but the 405 (refused before the count) declares the fields.
    expect(at("rate-limit", /^#\/paths\/~1api~1(v1~1exchange-rates|subscribe)\/post\/responses\/(?!405)/)).toEqual([])
  }, 30_000)

  it("names the deployment's base URL as its server", () => {
    expect(doc.servers).toEqual([{ url: "https://rates.example.test", description: expect.any(String) }])
  })
})
