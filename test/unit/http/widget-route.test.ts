/**
 * GET /widget.js over real HTTP (CONTRACT C10): a JavaScript module another origin's page may load (CORS from
 * the edge, Cross-Origin-Resource-Policy), revalidatable (a strong ETag per coding, 304), public for five
 * minutes, HEAD with GET's headers and no body, 405 for other methods, declared in the OpenAPI document.
 */
import { request } from "node:http"
import { readFileSync } from "node:fs"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { joinModules } from "../../../src/prices/widget/handlers.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"

const sourceOf = (file: string) => readFileSync(new URL(`../../../src/prices/widget/${file}`, import.meta.url), "utf8")
const source = Buffer.from(joinModules(sourceOf("parts.js"), sourceOf("widget.js")))
const page = "https://landing.example"

let app: TestApp
let listed: TestApp
beforeAll(async () => {
  app = await startTestApp()
  listed = await startTestApp({ env: { CORS_ORIGINS: `${page},https://other.example` } })
})
afterAll(async () => {
  await app?.close()
  await listed?.close()
})

interface Raw {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: Buffer
}

/** A request as sent on the wire, the body as received (not decoded), on a connection of its own. */
const send = (base: string, method: string, headers: Record<string, string> = {}) =>
  new Promise<Raw>((resolve, reject) => {
    const req = request(`${base}/widget.js`, { method, headers, agent: false }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }))
    })
    req.once("error", reject)
    req.end()
  })

describe("GET /widget.js", () => {
  it("is one module: parts.js's declarations, then widget.js without its import of them", () => {
    const text = source.toString()
    expect(text).not.toMatch(/^import /m)
    // The element is the one export; every part is declared once, before it is used.
    expect(text.match(/^export .*/gm)).toEqual(["export class CryptoPrices extends HTMLElement {"])
    expect(text.indexOf("const sparklinePoints =")).toBeLessThan(text.indexOf("export class CryptoPrices"))
    expect(() => joinModules(sourceOf("parts.js"), "export class X {}")).toThrow(/must import parts\.js/)
  })

  it("is the widget module, as a script another origin may load", async () => {
    const r = await send(app.url, "GET", { origin: page })
    expect(r.status).toBe(200)
    expect(r.headers["content-type"]).toBe("text/javascript; charset=utf-8")
    expect(r.body).toEqual(source)
    expect(r.body.toString()).toContain(`customElements.define("crypto-prices"`)
    expect(r.headers["access-control-allow-origin"]).toBe("*")
    expect(r.headers["cross-origin-resource-policy"]).toBe("cross-origin")
    expect(r.headers["x-content-type-options"]).toBe("nosniff")
    expect(r.headers["x-request-id"]).toMatch(/\S/)
    expect(r.headers["cache-control"]).toBe("public, max-age=300, stale-while-revalidate=86400")
    expect(r.headers.vary).toBe("Accept-Encoding")
    // Never rate-limited: the same bytes for every page view, and caches keep them.
    expect(r.headers.ratelimit).toBeUndefined()
  })

  it("has a strong ETag per coding and answers 304 to it, with the same caching headers", async () => {
    const plain = await send(app.url, "GET")
    const gz = await send(app.url, "GET", { "accept-encoding": "gzip" })
    const etag = plain.headers.etag as string
    expect(etag).toMatch(/^"[\w-]+"$/)
    expect(gz.headers["content-encoding"]).toBe("gzip")
    expect(gunzipSync(gz.body)).toEqual(source)
    expect(gz.headers.etag).not.toBe(etag)
    for (const [headers, tag] of [[{}, etag], [{ "accept-encoding": "gzip" }, gz.headers.etag as string]] as const) {
      const revalidated = await send(app.url, "GET", { ...headers, "if-none-match": tag, origin: page })
      expect(revalidated.status).toBe(304)
      expect(revalidated.body.byteLength).toBe(0)
      expect(revalidated.headers.etag).toBe(tag)
      expect(revalidated.headers["cache-control"]).toBe(plain.headers["cache-control"])
      expect(revalidated.headers["cross-origin-resource-policy"]).toBe("cross-origin")
      expect(revalidated.headers["access-control-allow-origin"]).toBe("*")
    }
    expect((await send(app.url, "GET", { "if-none-match": "\"something-else\"" })).status).toBe(200)
  })

  it("answers HEAD with GET's headers and no body", async () => {
    const get = await send(app.url, "GET")
    const head = await send(app.url, "HEAD")
    expect(head.status).toBe(200)
    expect(head.body.byteLength).toBe(0)
    for (const name of ["content-type", "etag", "cache-control", "cross-origin-resource-policy", "vary"]) {
      expect(head.headers[name], name).toBe(get.headers[name])
    }
    expect((await send(app.url, "HEAD", { "if-none-match": get.headers.etag as string })).status).toBe(304)
  })

  it("refuses other methods with 405 and Allow: GET, HEAD, as a problem", async () => {
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const r = await send(app.url, method)
      expect(r.status, method).toBe(405)
      expect(r.headers.allow).toBe("GET, HEAD")
      expect(r.headers["content-type"]).toBe("application/problem+json")
      expect(JSON.parse(r.body.toString()).code).toBe("method_not_allowed")
    }
    // A CORS preflight of a listed origin is answered; a bare OPTIONS is not a method of the path.
    const preflight = await send(listed.url, "OPTIONS", { origin: page, "access-control-request-method": "GET" })
    expect(preflight.status).toBe(204)
    expect(preflight.headers["access-control-allow-methods"]).toBe("GET, HEAD")
    expect((await send(app.url, "OPTIONS")).status).toBe(405)
  })

  it("with CORS_ORIGINS listing origins: allows those, varies by Origin, and refuses others by omission", async () => {
    const allowed = await send(listed.url, "GET", { origin: page })
    expect(allowed.status).toBe(200)
    expect(allowed.headers["access-control-allow-origin"]).toBe(page)
    expect(allowed.headers.vary).toBe("Accept-Encoding, Origin")
    const other = await send(listed.url, "GET", { origin: "https://elsewhere.example" })
    expect(other.status).toBe(200)
    expect(other.headers["access-control-allow-origin"]).toBeUndefined()
    expect(other.headers.vary).toBe("Accept-Encoding, Origin")
  })

  it("is in the OpenAPI document: getWidget, text/javascript, its ETag and 304, no security needed", async () => {
    const spec = await (await fetch(`${app.url}/openapi.json`)).json() as { paths: Record<string, Record<string, any>> }
    const op = spec.paths["/widget.js"]!.get
    expect(op.operationId).toBe("getWidget")
    expect(Object.keys(op.responses["200"].content)).toEqual(["text/javascript"])
    expect(Object.keys(op.responses["200"].headers)).toEqual(["ETag", "Cache-Control"])
    expect(Object.keys(op.responses["304"].headers)).toEqual(["ETag", "Cache-Control"])
    expect(Object.keys(op.responses).sort()).toEqual(["200", "304", "405", "500"])
    expect(op.security).toEqual([{}])
    expect(spec.paths["/widget.js"]!.post).toBeUndefined()
  })
})
