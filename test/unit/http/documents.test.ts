/**
 * The documents over real HTTP (CONTRACT C3, C9; issue 14.10, 15.4, 15.6): compressed when accepted and
 * only then, a strong ETag and 304, cacheable; HTML with a charset and a Content-Security-Policy that
 * forbids framing; the redirects, the favicon, the problem index and the problem catalogue as JSON.
 */
import { request } from "node:http"
import { brotliDecompressSync, gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { BASE } from "../../support/problems.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

interface Raw {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: Buffer
}

/**
 * A GET as sent on the wire: no Accept-Encoding unless given, the body as received (not decoded). Each on a connection
 * of its own: a kept-alive one reused just as the server times it out ends in ECONNRESET on a starved machine.
 */
const get = (path: string, headers: Record<string, string> = {}) =>
  new Promise<Raw>((resolve, reject) => {
    const req = request(`${app.url}${path}`, { headers, agent: false }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }))
    })
    req.once("error", reject)
    req.end()
  })

describe.each(["/docs/scalar.js", "/openapi.json", "/docs"])("%s", (path) => {
  it("is compressed only when accepted, br preferred, and decodes to the same bytes", async () => {
    const plain = await get(path)
    const gz = await get(path, { "accept-encoding": "gzip" })
    const br = await get(path, { "accept-encoding": "gzip, deflate, br" })
    expect(plain.status).toBe(200)
    expect(plain.headers["content-encoding"]).toBeUndefined()
    expect(gz.headers["content-encoding"]).toBe("gzip")
    expect(br.headers["content-encoding"]).toBe("br")
    for (const r of [plain, gz, br]) {
      expect(r.headers.vary).toMatch(/Accept-Encoding/)
      expect(Number(r.headers["content-length"])).toBe(r.body.byteLength)
    }
    expect(gunzipSync(gz.body)).toEqual(plain.body)
    expect(brotliDecompressSync(br.body)).toEqual(plain.body)
    if (path !== "/docs") {
      // The 3 MB script and the 28 kB document shrink to under a third.
      expect(gz.body.byteLength).toBeLessThan(plain.body.byteLength / 3)
      expect(br.body.byteLength).toBeLessThan(gz.body.byteLength)
    }
    // `br;q=0` is a refusal (RFC 9110 §12.5.3).
    expect((await get(path, { "accept-encoding": "br;q=0, gzip" })).headers["content-encoding"]).toBe("gzip")
    expect((await get(path, { "accept-encoding": "identity" })).headers["content-encoding"]).toBeUndefined()
  })

  it("has a strong ETag per representation and answers 304 to it", async () => {
    const plain = await get(path)
    const br = await get(path, { "accept-encoding": "br" })
    const etag = plain.headers.etag as string
    expect(etag).toMatch(/^"[\w-]+"$/)
    expect(br.headers.etag).not.toBe(etag)
    expect(plain.headers["cache-control"]).toMatch(/^public, max-age=\d+$/)
    const revalidated = await get(path, { "accept-encoding": "br", "if-none-match": br.headers.etag as string })
    expect(revalidated.status).toBe(304)
    expect(revalidated.body.byteLength).toBe(0)
    expect(revalidated.headers.etag).toBe(br.headers.etag)
    expect(revalidated.headers["cache-control"]).toBe(plain.headers["cache-control"])
    expect((await get(path, { "if-none-match": "\"something-else\"" })).status).toBe(200)
  })
})

describe("HTML pages", () => {
  it.each(["/docs", "/problems", "/problems/rate_limited", "/problems/invalid_client"])("%s: charset and a CSP that forbids framing", async (path) => {
    const res = await get(path)
    expect(res.status).toBe(200)
    expect(res.headers["content-type"]).toBe("text/html; charset=utf-8")
    const csp = res.headers["content-security-policy"] as string
    expect(csp).toMatch(/frame-ancestors 'none'/)
    expect(csp).toMatch(/default-src 'none'/)
    expect(csp).not.toMatch(/unsafe-eval|script-src[^;]*unsafe-inline/)
    expect(res.headers["x-content-type-options"]).toBe("nosniff")
  })

  it("/docs loads its scripts from the service alone", async () => {
    const page = (await get("/docs")).body.toString()
    const sources = [...page.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)]
    expect(sources.map((m) => m[1])).toEqual([" src=\"/docs/scalar.js\"", " src=\"/docs/start.js\""])
    expect(sources.every((m) => m[2] === "")).toBe(true) // no inline script
    const start = (await get("/docs/start.js")).body.toString()
    expect(start).toContain("\"url\":\"/openapi.json\"")
    expect(start).toContain("\"showDeveloperTools\":\"never\"")
  })
})

describe("redirects and the favicon", () => {
  it("GET / and /docs/ lead to /docs", async () => {
    const root = await get("/")
    expect(root.status).toBe(302)
    expect(root.headers.location).toBe("/docs")
    const slash = await get("/docs/")
    expect(slash.status).toBe(308)
    expect(slash.headers.location).toBe("/docs")
  })

  it("/favicon.ico is an empty, cacheable answer", async () => {
    const res = await get("/favicon.ico")
    expect(res.status).toBe(204)
    expect(res.headers["cache-control"]).toMatch(/^public, max-age=\d+$/)
  })
})

describe("problem types", () => {
  it("/problems lists every type, as HTML or as JSON", async () => {
    const page = (await get("/problems")).body.toString()
    for (const code of ["validation_failed", "rate_limited", "service_unavailable", "invalid_client"]) {
      expect(page).toContain(`href="/problems/${code}"`)
    }
    const res = await get("/problems", { accept: "application/json" })
    expect(res.headers["content-type"]).toMatch(/^application\/json/)
    expect(res.headers.vary).toMatch(/Accept\b/)
    const { problems } = JSON.parse(res.body.toString())
    expect(problems.length).toBeGreaterThanOrEqual(18)
    expect(problems).toContainEqual({
      type: `${BASE}/problems/rate_limited`,
      code: "rate_limited",
      status: 429,
      title: "Too many requests",
      detail: expect.any(String),
      resolution: expect.any(String)
    })
  })

  it("/problems/{code} gives the catalogue entry as JSON when asked, HTML otherwise", async () => {
    const json = await get("/problems/validation_failed", { accept: "application/json" })
    expect(JSON.parse(json.body.toString())).toMatchObject({ type: `${BASE}/problems/validation_failed`, code: "validation_failed", status: 400 })
    const browser = await get("/problems/validation_failed", { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" })
    expect(browser.headers["content-type"]).toBe("text/html; charset=utf-8")
    const unknown = await get("/problems/no_such_code", { accept: "application/json" })
    expect(unknown.status).toBe(404)
    expect(unknown.headers["content-type"]).toBe("application/problem+json")
  })
})
