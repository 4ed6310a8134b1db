/**
 * GET /api/v1/rates (C4 "Cacheable reads"): the POST's answer for the same query, cacheable as long as
 * it holds (Cache-Control derived from the answer's freshness, a strong ETag, 304 on If-None-Match),
 * whether the HttpApi answers it or the edge repeats it from memory; every spelling of one query gets
 * one body and one ETag; problems are never cached.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cacheControlFor } from "../../../src/rates/cacheControl.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { expectProblem } from "../../support/problems.ts"
import { countingRatesProvider } from "../../support/rates.ts"

const NOW = Date.UTC(2026, 10, 22, 10, 0, 0)

/** The directives of a Cache-Control field, by name. */
const directives = (field: string | null) =>
  Object.fromEntries((field ?? "").split(",").map((part) => part.trim().split("=")).map(([name, value]) => [name, value === undefined ? true : Number(value)]))

describe("cacheControlFor", () => {
  const day = 86_400
  it("max-age until the answer stops holding, rounded up to whole seconds; a live answer's is 1", () => {
    expect(cacheControlFor(NOW + 1_000, NOW, day)).toBe("public, max-age=1, stale-while-revalidate=5, stale-if-error=86400")
    expect(cacheControlFor(NOW + 400, NOW, day)).toBe("public, max-age=1, stale-while-revalidate=5, stale-if-error=86400")
    expect(cacheControlFor(NOW + 30_000, NOW, day)).toBe("public, max-age=30, stale-while-revalidate=30, stale-if-error=86400")
    expect(cacheControlFor(NOW + 600_000, NOW, day)).toBe("public, max-age=600, stale-while-revalidate=60, stale-if-error=86400")
  })
  it("at most an hour; 0 once past (a repeat sent while the answer is rebuilt)", () => {
    expect(directives(cacheControlFor(Number.POSITIVE_INFINITY, NOW, day))["max-age"]).toBe(3_600)
    expect(directives(cacheControlFor(NOW - 100, NOW, day))["max-age"]).toBe(0)
  })
  it("stale-if-error: as long as last-good copies are served, at most a day", () => {
    expect(directives(cacheControlFor(NOW + 1_000, NOW, 3_600))["stale-if-error"]).toBe(3_600)
    expect(directives(cacheControlFor(NOW + 1_000, NOW, 168 * 3_600))["stale-if-error"]).toBe(day)
  })
  it("an answer of last-good copies (freshUntil 0): 5 s, not revalidated stale", () => {
    expect(cacheControlFor(0, NOW, day)).toBe("public, max-age=5, stale-while-revalidate=0, stale-if-error=86400")
  })
})

describe("GET /api/v1/rates", () => {
  let app: TestApp
  let calls: { historical: number }
  let freshFor = 60_000
  /** An answer of last-good copies says it holds until 0. */
  let lastGood = false
  beforeAll(async () => {
    const rates = countingRatesProvider(() => (lastGood ? 0 : Date.now() + freshFor))
    calls = rates.calls
    app = await startTestApp({ rates: rates.layer })
  })
  afterAll(() => app.close())
  const get = (query: string, headers: Record<string, string> = {}, method = "GET") => fetch(`${app.url}/api/v1/rates?${query}`, { method, headers })

  it("answers what the POST answers for the same query, cacheable, with a strong ETag", async () => {
    const post = await fetch(`${app.url}/api/v1/exchange-rates`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ cryptos: ["SOL", "ETH"], currency: "gbp", days: 3 })
    })
    const res = await get("cryptos=SOL,ETH&currency=gbp&days=3")
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("application/json")
    expect(await res.text()).toBe(await post.text())
    const cache = directives(res.headers.get("cache-control"))
    expect(cache).toMatchObject({ public: true, "stale-while-revalidate": 60, "stale-if-error": 86_400 })
    expect(cache["max-age"]).toBeGreaterThanOrEqual(59)
    expect(cache["max-age"]).toBeLessThanOrEqual(60)
    expect(res.headers.get("etag")).toMatch(/^"[A-Za-z0-9_-]{27}"$/)
    expect(res.headers.get("vary")).toBeNull()
    expect(post.headers.get("cache-control")).toBe("no-store")
  })

  it("every spelling of one query: one body, one ETag; a repeat from memory, the same headers", async () => {
    const spellings = [
      "cryptos=BTC,ETH",
      "cryptos=btc,ETH,eth&currency=USD",
      "days=30&cryptos=Btc,eTh&currency=usd",
      "cryptos=BTC,ETH&days=30&utm_source=x",
      "cryptos=BTC%2CETH&currency=Usd&days=30"
    ]
    const before = calls.historical
    const answers = []
    for (const spelling of spellings) {
      const res = await get(spelling)
      expect(res.status, spelling).toBe(200)
      answers.push({ etag: res.headers.get("etag"), body: await res.text(), cacheControl: res.headers.get("cache-control") })
    }
    // Only the first reached the HttpApi: the others were the edge's ready answers.
    expect(calls.historical).toBe(before + 1)
    expect(new Set(answers.map((a) => a.etag)).size).toBe(1)
    expect(new Set(answers.map((a) => a.body)).size).toBe(1)
    expect(answers.every((a) => directives(a.cacheControl).public === true)).toBe(true)
  })

  it("If-None-Match naming the ETag: 304 without a body, the same ETag and Cache-Control, from memory or the HttpApi", async () => {
    const first = await get("cryptos=SOL&days=2")
    const etag = first.headers.get("etag")!
    // The next one is the edge's ready answer; a spelling never asked before is the HttpApi's.
    for (const [query, ready] of [["cryptos=SOL&days=2", true], ["cryptos=sol,SOL&days=2&currency=usd", true]] as const) {
      const before = calls.historical
      const res = await get(query, { "if-none-match": `W/"other", ${etag}` })
      expect(res.status, query).toBe(304)
      expect(await res.text()).toBe("")
      expect(res.headers.get("etag")).toBe(etag)
      expect(directives(res.headers.get("cache-control")).public).toBe(true)
      expect(res.headers.get("content-type")).toBeNull()
      expect(calls.historical).toBe(ready ? before : before + 1)
    }
    expect((await get("cryptos=SOL&days=2", { "if-none-match": "\"stale-tag\"" })).status).toBe(200)
    await new Promise((r) => setTimeout(r, 20))
    const logged = app.logs.filter((l) => l.status === 304)
    expect(logged.length).toBeGreaterThanOrEqual(2)
    expect(logged[0]).toMatchObject({ method: "GET", path: "/api/v1/rates" })
  })

  it("the HttpApi's 304 too, when the answer does not hold (nothing to repeat)", async () => {
    freshFor = 0
    try {
      const first = await get("cryptos=ETH&days=4")
      expect(directives(first.headers.get("cache-control"))["max-age"]).toBe(0)
      const before = calls.historical
      const res = await get("cryptos=ETH&days=4", { "if-none-match": first.headers.get("etag")! })
      expect(res.status).toBe(304)
      expect(calls.historical).toBe(before + 1)
    } finally {
      freshFor = 60_000
    }
  })

  it("an answer of last-good copies: kept 5 s, not served stale while revalidating", async () => {
    lastGood = true
    try {
      const res = await get("cryptos=SOL,BTC&days=6")
      expect(res.status).toBe(200)
      expect(directives(res.headers.get("cache-control"))).toEqual({ public: true, "max-age": 5, "stale-while-revalidate": 0, "stale-if-error": 86_400 })
      // Not remembered: the next one is asked again.
      const before = calls.historical
      expect((await get("cryptos=SOL,BTC&days=6")).status).toBe(200)
      expect(calls.historical).toBe(before + 1)
    } finally {
      lastGood = false
    }
  })

  it("HEAD: the headers of the GET, no body", async () => {
    const getRes = await get("cryptos=BTC&days=5")
    const head = await get("cryptos=BTC&days=5", {}, "HEAD")
    expect(head.status).toBe(200)
    expect(await head.text()).toBe("")
    expect(head.headers.get("etag")).toBe(getRes.headers.get("etag"))
    expect(head.headers.get("content-length")).toBe(String((await getRes.arrayBuffer()).byteLength))
  })

  it("refusals are problems, never cached", async () => {
    const missing = await get("currency=usd")
    const problem = await expectProblem(missing, 400, "validation_failed")
    expect(problem.errors).toEqual([expect.objectContaining({ pointer: "/cryptos" })])
    expect(missing.headers.get("cache-control")).toBe("no-store")
    const bad = await expectProblem(await get("cryptos=BTC,B%20TC,&days=0&currency=u"), 400, "validation_failed")
    expect((bad.errors as Array<{ pointer: string }>).map((e) => e.pointer)).toEqual(["/cryptos/1", "/cryptos/2", "/currency", "/days"])
    const tooMany = await expectProblem(await get(`cryptos=${Array.from({ length: 51 }, (_, i) => `S${i}`).join(",")}`), 400, "validation_failed")
    expect((tooMany.errors as Array<{ pointer: string }>)[0]!.pointer).toBe("/cryptos")
    const unknown = await get("cryptos=NOPE")
    await expectProblem(unknown, 400, "no_valid_symbols")
    expect(unknown.headers.get("cache-control")).toBe("no-store")
    const down = await get("cryptos=DOWN")
    await expectProblem(down, 502, "upstream_error")
    expect(down.headers.get("cache-control")).toBe("no-store")
    const busy = await get("cryptos=BUSY")
    await expectProblem(busy, 503, "service_unavailable")
    expect(busy.headers.get("cache-control")).toBe("no-store")
    expect(busy.headers.get("retry-after")).toBe("30")
  })

  it("another method is 405 with Allow: GET, HEAD; a GET of the POST's path stays 405", async () => {
    const post = await fetch(`${app.url}/api/v1/rates?cryptos=BTC`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
    await expectProblem(post, 405, "method_not_allowed")
    expect(post.headers.get("allow")).toBe("GET, HEAD")
    const old = await fetch(`${app.url}/api/v1/exchange-rates?cryptos=BTC`)
    await expectProblem(old, 405, "method_not_allowed")
    expect(old.headers.get("allow")).toBe("POST")
  })
})

describe("Vary: only what the answer varies on", () => {
  it("a list of origins: Vary: Origin on the 200 and the 304", async () => {
    const app = await startTestApp({ rates: countingRatesProvider(() => Date.now() + 60_000).layer, env: { CORS_ORIGINS: "https://a.example" } })
    try {
      const res = await fetch(`${app.url}/api/v1/rates?cryptos=BTC`, { headers: { origin: "https://a.example" } })
      expect(res.status).toBe(200)
      expect(res.headers.get("vary")).toBe("Origin")
      expect(res.headers.get("access-control-allow-origin")).toBe("https://a.example")
      const again = await fetch(`${app.url}/api/v1/rates?cryptos=BTC`, { headers: { origin: "https://a.example", "if-none-match": res.headers.get("etag")! } })
      expect(again.status).toBe(304)
      expect(again.headers.get("vary")).toBe("Origin")
    } finally {
      await app.close()
    }
  })
})
