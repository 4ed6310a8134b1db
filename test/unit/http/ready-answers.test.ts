/**
 * Ready answers (src/http/ReadyAnswers.ts) are a short-circuit inside the one pipeline, not a second
 * one: a repeated rates query is answered from memory with the very bytes the HttpApi gave, with the
 * same edge headers, count and log line; anything a ready answer cannot take reaches the HttpApi
 * with its body intact.
 */
import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { countingRatesProvider } from "../../support/rates.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { expectProblem } from "../../support/problems.ts"

/** The fake provider, answers fresh for a minute, counting how often the HttpApi asks it. */
const counting = () => countingRatesProvider(() => Date.now() + 60_000)

const QUERY = JSON.stringify({ cryptos: ["BTC", "ETH"], days: 7 })
const post = (app: TestApp, body: string, headers: Record<string, string> = {}) =>
  fetch(`${app.url}/api/v1/exchange-rates`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body })

/** Response headers without the per-request ones. */
const stable = (res: Response) =>
  [...res.headers].filter(([name]) => !["date", "x-request-id", "ratelimit", "keep-alive", "connection"].includes(name))

describe("ready answers", () => {
  let app: TestApp
  let calls: { historical: number }
  beforeAll(async () => {
    const rates = counting()
    calls = rates.calls
    app = await startTestApp({ rates: rates.layer, env: { RATE_LIMIT_RATES_PER_MIN: "20" } })
  })
  afterAll(() => app.close())

  it("answer a repeated query from memory: same bytes, same edge headers, counted and logged", async () => {
    const first = await post(app, QUERY)
    expect(first.status).toBe(200)
    const firstBody = await first.text()
    const before = calls.historical
    // Another spelling of the same query: upper-cased and de-duplicated by the contract's rules.
    const again = await post(app, JSON.stringify({ cryptos: ["btc", "ETH", "eth"], days: 7 }))
    expect(again.status).toBe(200)
    expect(await again.text()).toBe(firstBody)
    expect(calls.historical).toBe(before)
    expect(stable(again)).toEqual(stable(first))
    expect(again.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
    const r1 = /r=(\d+)/.exec(first.headers.get("ratelimit")!)![1]
    const r2 = /r=(\d+)/.exec(again.headers.get("ratelimit")!)![1]
    expect(Number(r2)).toBe(Number(r1) - 1)
    await new Promise((r) => setTimeout(r, 20))
    const logged = app.logs.filter((l) => l.requestId === again.headers.get("x-request-id"))
    expect(logged).toEqual([expect.objectContaining({ method: "POST", path: "/api/v1/exchange-rates", status: 200 })])
  })

  it("carry the edge's CORS headers like any response", async () => {
    await post(app, QUERY)
    const res = await post(app, QUERY, { origin: "https://site.example" })
    expect(res.status).toBe(200)
    expect(res.headers.get("access-control-allow-origin")).toBe("*")
    expect(res.headers.get("access-control-expose-headers")).toMatch(/X-Request-Id/)
  })

  it("hand what they cannot take to the HttpApi, body intact", async () => {
    await expectProblem(await post(app, "{\"cryptos\": [\"BTC\""), 400, "malformed_json")
    const invalid = await expectProblem(await post(app, JSON.stringify({ cryptos: ["B TC"] })), 400, "validation_failed")
    expect(invalid.errors).toEqual([expect.objectContaining({ pointer: "/cryptos/0" })])
    const before = calls.historical
    const other = await post(app, JSON.stringify({ cryptos: ["SOL"], days: 3 }))
    expect(other.status).toBe(200)
    expect(calls.historical).toBe(before + 1)
  })

  it("leave a chunked body to the HttpApi, which reads it whole", async () => {
    const url = new URL(app.url)
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: url.hostname, port: url.port, path: "/api/v1/exchange-rates", method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        res.resume()
        resolve(res.statusCode!)
      })
      req.on("error", reject)
      req.write(QUERY.slice(0, 5))
      setTimeout(() => req.end(QUERY.slice(5)), 20)
    })
    expect(status).toBe(200)
  })
})

describe("health answered ready", () => {
  let app: TestApp
  beforeAll(async () => {
    app = await startTestApp({ env: { APP_ENV: "staging" } })
  })
  afterAll(() => app.close())

  it("GET and HEAD: the report with the edge's headers; HEAD has no body", async () => {
    const get = await fetch(`${app.url}/api/health`)
    expect(get.status).toBe(200)
    expect(await get.json()).toMatchObject({ status: "healthy", environment: "staging" })
    expect(get.headers.get("x-content-type-options")).toBe("nosniff")
    expect(get.headers.get("cache-control")).toBe("no-store")
    const head = await fetch(`${app.url}/api/health`, { method: "HEAD" })
    expect(head.status).toBe(200)
    expect(await head.text()).toBe("")
  })
})
