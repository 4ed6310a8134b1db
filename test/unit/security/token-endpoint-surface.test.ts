/**
 * Issue 14, findings 6 and 7, over real HTTP (CONTRACT C6).
 *
 * 6. The token endpoint's 405 and 413 were `application/problem+json` without the OAuth `error`
 *    member, which OAuth clients read; every error of this endpoint is in its OAuth JSON form. A
 *    `Content-Encoding: gzip` header on a plain form was ignored and a token issued: a gateway that
 *    decodes would have read another body. It is refused (400 invalid_request).
 * 7. Basic credentials plus a `client_id` body parameter naming the same client were refused; some
 *    client libraries send it, and node-oidc-provider accepts it. A different one, or a secret in the
 *    body, stays invalid_request.
 */
import { request } from "node:http"
import { gzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { basic, startTestApp, type TestApp } from "../../support/app.ts"

const BASE = "https://api.example.test"
const FORM = "application/x-www-form-urlencoded"
const GOOD = basic("svc-all", "secret-all")

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

/** C6: `application/json` with the OAuth members and the problem members; never cached. */
const expectOAuthError = async (res: Response, status: number, error: string, code = error) => {
  expect(res.status).toBe(status)
  expect(res.headers.get("content-type")).toBe("application/json")
  expect(res.headers.get("cache-control")).toBe("no-store")
  expect(res.headers.get("pragma")).toBe("no-cache")
  expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
  const body = await res.json()
  expect(body).toMatchObject({
    error,
    type: `${BASE}/problems/${code}`,
    status,
    code,
    instance: `urn:uuid:${res.headers.get("x-request-id")}`
  })
  for (const member of ["error_description", "title", "detail", "resolution"]) expect(typeof body[member], member).toBe("string")
  expect(body.detail).toBe(body.error_description)
  return body
}

const post = (body: string | Uint8Array<ArrayBuffer>, headers: Record<string, string> = {}) =>
  fetch(`${app.url}/oauth/token`, { method: "POST", headers: { authorization: GOOD, "content-type": FORM, ...headers }, body })

/** A chunked body (no Content-Length), which the edge cannot refuse from the headers alone. */
const postChunked = (size: number) =>
  new Promise<Response>((resolve, reject) => {
    const req = request(`${app.url}/oauth/token`, {
      method: "POST",
      headers: { authorization: GOOD, "content-type": FORM, "transfer-encoding": "chunked" }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => {
        const headers = new Headers()
        for (const [name, value] of Object.entries(res.headers)) if (typeof value === "string") headers.set(name, value)
        resolve(new Response(Buffer.concat(chunks), { status: res.statusCode!, headers }))
      })
    })
    req.on("error", reject)
    const chunk = `grant_type=client_credentials&pad=${"a".repeat(1024)}`
    for (let sent = 0; sent < size; sent += chunk.length) req.write(chunk)
    req.end()
  })

describe("every error of the token endpoint is in the OAuth JSON form (finding 6)", () => {
  it.each(["GET", "PUT", "DELETE", "PATCH"])("405 for %s, with Allow: POST", async (method) => {
    const res = await fetch(`${app.url}/oauth/token`, { method })
    expect(res.headers.get("allow")).toBe("POST")
    await expectOAuthError(res, 405, "invalid_request", "method_not_allowed")
  })

  it("413 for a Content-Length over 16 KiB", async () => {
    await expectOAuthError(await post(`grant_type=client_credentials&pad=${"a".repeat(17_000)}`), 413, "invalid_request", "payload_too_large")
  })

  it("413 for a chunked body over 16 KiB", async () => {
    await expectOAuthError(await postChunked(20_000), 413, "invalid_request", "payload_too_large")
  })

  it("400 invalid_request, not 415, for a body that is not a form", async () => {
    await expectOAuthError(await post("{}", { "content-type": "application/json" }), 400, "invalid_request")
  })
})

describe("a Content-Encoding on the token request is refused (finding 6)", () => {
  it("400 invalid_request for gzip on a plain form: no token", async () => {
    const body = await expectOAuthError(await post("grant_type=client_credentials", { "content-encoding": "gzip" }), 400, "invalid_request")
    expect(body.access_token).toBeUndefined()
  })

  it("400 invalid_request for a gzipped form too: the service never decodes a body", async () => {
    await expectOAuthError(await post(new Uint8Array(gzipSync("grant_type=client_credentials")), { "content-encoding": "gzip" }), 400, "invalid_request")
  })

  it("identity is no coding: the token is issued", async () => {
    expect((await post("grant_type=client_credentials", { "content-encoding": "identity" })).status).toBe(200)
  })
})

describe("Basic credentials with a client_id in the body (finding 7)", () => {
  it("200 when the body's client_id names the authenticated client", async () => {
    const res = await post("grant_type=client_credentials&client_id=svc-all&scope=rates%3Aread")
    expect(res.status).toBe(200)
    expect((await res.json()).scope).toBe("rates:read")
  })

  it("compares the decoded ids: a form-encoded client_id matches its Basic form", async () => {
    const res = await fetch(`${app.url}/oauth/token`, {
      method: "POST",
      headers: { authorization: basic("svc-all", "secret-all"), "content-type": FORM },
      body: "grant_type=client_credentials&client_id=svc%2Dall"
    })
    expect(res.status).toBe(200)
  })

  it("400 invalid_request when the body names another client", async () => {
    await expectOAuthError(await post("grant_type=client_credentials&client_id=svc-health"), 400, "invalid_request")
  })

  it("400 invalid_request for a secret in the body, with or without a matching client_id", async () => {
    await expectOAuthError(await post("grant_type=client_credentials&client_secret=secret-all"), 400, "invalid_request")
    await expectOAuthError(await post("grant_type=client_credentials&client_id=svc-all&client_secret=secret-all"), 400, "invalid_request")
  })
})

// Last: its failures count against this address.
describe("the failure limit's 429 (finding 6)", () => {
  it("is in the OAuth JSON form too", async () => {
    const wrong = basic("svc-health", "wrong")
    for (let i = 0; i < 10; i++) expect((await post("grant_type=client_credentials", { authorization: wrong })).status).toBe(401)
    await expectOAuthError(await post("grant_type=client_credentials", { authorization: wrong }), 429, "invalid_request", "rate_limited")
  })
})
