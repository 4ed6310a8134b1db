/**
 * The response headers /openapi.json declares are the ones the service sends (issue 23.2): each answer
 * provoked over HTTP carries every header its operation's response declares, and the RateLimit fields
 * appear on no answer that does not declare them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, tokenFor } from "../../support/app.ts"

let app: TestApp
let doc: any
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_RATES_PER_MIN: "12" } })
  doc = await (await fetch(`${app.url}/openapi.json`)).json()
})
afterAll(() => app.close())

const rateLimitFields = ["ratelimit", "ratelimit-policy"]

/** Names of the headers the document declares for this answer (lower case). */
const declared = (path: string, method: string, status: number): Array<string> => {
  // A 405 answers a method the path lacks: the document declares it on the path's operation.
  const item = doc.paths[path]
  const response = (item[method.toLowerCase()] ?? Object.values<any>(item)[0]).responses[String(status)]
  expect(response, `${method} ${path} declares ${status}`).toBeDefined()
  return Object.keys(response.headers ?? {}).map((name) => name.toLowerCase())
}

const check = async (path: string, init: RequestInit & { method: string }, status: number) => {
  const res = await fetch(`${app.url}${path}`, init)
  await res.arrayBuffer()
  expect(res.status, `${init.method} ${path}`).toBe(status)
  const names = declared(path, init.method, status)
  for (const name of names) expect(res.headers.has(name), `${init.method} ${path} ${status} sends ${name}`).toBe(true)
  for (const name of rateLimitFields) {
    if (!names.includes(name)) expect(res.headers.has(name), `${init.method} ${path} ${status} sends undeclared ${name}`).toBe(false)
  }
  return names
}

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body)
})

describe("declared response headers are sent", () => {
  it("exchange rates: every counted answer has the RateLimit fields, a 429 and a 503 Retry-After too", async () => {
    const rates = "/api/v1/exchange-rates"
    const scoped = await tokenFor(app, "svc-health", "secret-health")
    expect(await check(rates, json({ cryptos: ["BTC"] }), 200)).toEqual(expect.arrayContaining(rateLimitFields))
    await check(rates, json({ cryptos: ["NOPE"] }), 400)
    await check(rates, json({ cryptos: ["X".repeat(33)] }), 400)
    await check(rates, json({ cryptos: ["BTC"] }, { authorization: "Bearer not-a-token" }), 401)
    await check(rates, json({ cryptos: ["BTC"] }, { authorization: `Bearer ${scoped}` }), 403)
    await check(rates, { method: "POST", headers: { "content-type": "text/plain" }, body: "BTC" }, 415)
    await check(rates, json({ cryptos: ["DOWN"] }), 502)
    expect(await check(rates, json({ cryptos: ["BUSY"] }), 503)).toContain("retry-after")
    expect(await check(rates, { method: "DELETE" }, 405)).toEqual(["allow"])
    let status = 0
    for (let i = 0; i < 20 && status !== 429; i++) {
      status = (await fetch(`${app.url}${rates}`, json({ cryptos: ["BTC"] }))).status
    }
    expect(status).toBe(429)
    expect(await check(rates, json({ cryptos: ["BTC"] }), 429)).toEqual(expect.arrayContaining(["retry-after", ...rateLimitFields]))
  })

  it("subscribe: the same fields; health and the token endpoint: none but their own", async () => {
    await check("/api/subscribe", json({ email: "reader@example.com", locale: "en" }), 200)
    await check("/api/subscribe", json({ email: "reader@example.com" }), 400)
    expect(await check("/api/health", { method: "GET" }, 200)).toEqual([])
    expect(await check("/api/health", { method: "POST" }, 405)).toEqual(["allow"])
    const token = { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "grant_type=client_credentials" }
    expect(await check("/oauth/token", token, 401)).toEqual(["www-authenticate"])
  })
})
