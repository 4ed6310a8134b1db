/**
 * Defects the fuzz suite found, each pinned by the smallest request that showed it. Every test here
 * failed before its fix (see the report of the "Reliability: fuzz every endpoint" issue).
 */
import { gzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { basic } from "../../support/app.ts"
import { expectNoViolations, type FuzzTarget, startFuzzTarget } from "../../support/fuzz/harness.ts"
import { jsonOf } from "../../support/fuzz/invariants.ts"

let target: FuzzTarget
beforeAll(async () => {
  target = await startFuzzTarget()
})
afterAll(() => target.close())

const subscribe = (email: string) =>
  target.exchange({
    method: "POST",
    path: "/api/subscribe",
    headers: [["Content-Type", "application/json"]],
    // JSON.stringify escapes a lone surrogate as \udXXX, which JSON.parse turns back into one.
    body: JSON.stringify({ email, locale: "en" })
  })

describe("fixed defects", () => {
  // Found by bodies.test.ts "odd Unicode": validator's isEmail calls encodeURI, which throws URIError
  // on a lone surrogate; the handler did not expect a throw and the edge answered 500.
  it.each(["\uD800@example.com", "a@\uDFFFexample.com", "reader@example.c\uD83D", "\uDC00\uD800x@example.com"])(
    "an address with a lone surrogate (%j) is 400 validation_failed at /email, not 500",
    async (email) => {
      const checked = await subscribe(email)
      expectNoViolations(checked, `subscribe ${JSON.stringify(email)}`)
      expect(checked.response.status).toBe(400)
      const body = jsonOf(checked.response)
      expect(body.code).toBe("validation_failed")
      expect(body.errors).toEqual([{ pointer: "/email", detail: expect.stringMatching(/unpaired surrogate/) }])
    }
  )

  // Found by http-surface-methods-paths.test.ts "path variants": the router percent-decodes and cuts at ';', but the
  // edge decided CORS on the raw path, so /oauth/%74oken or /oauth/token;x got Access-Control-Allow-Origin.
  it.each(["/oauth/%74oken", "/oa%75th/token", "/oauth/token;x=1", "/%6Fauth/token"])(
    "no CORS on the token endpoint spelled %s (C2)",
    async (path) => {
      for (const method of ["POST", "GET"]) {
        const checked = await target.exchange({
          method,
          path,
          headers: [
            ["Origin", "https://evil.example"],
            ["Content-Type", "application/x-www-form-urlencoded"],
            ["Authorization", basic("svc-all", "secret-all")]
          ],
          body: method === "POST" ? "grant_type=client_credentials" : ""
        })
        expectNoViolations(checked, `${method} ${path}`)
        expect(checked.response.headers["access-control-allow-origin"], `${method} ${path}`).toBeUndefined()
      }
    }
  )

  it("a CORS preflight on a public operation spelled with percent-escapes is answered like the plain one", async () => {
    const checked = await target.exchange({
      method: "OPTIONS",
      path: "/api/%68ealth",
      headers: [["Origin", "https://app.example"], ["Access-Control-Request-Method", "GET"]]
    })
    expectNoViolations(checked, "OPTIONS /api/%68ealth")
    expect(checked.response.status).toBe(204)
  })

  // Found by bodies.test.ts "Content-Encoding": the body was parsed as JSON whatever its coding, so a
  // gzip body was "malformed JSON" and a plain body labelled gzip was accepted (RFC 9110 §8.4, §15.5.16).
  it.each([["gzip", true], ["gzip", false], ["br", false], ["deflate, gzip", false]] as const)(
    "Content-Encoding %s (body compressed: %s) on a JSON operation is 415 with Accept-Encoding: identity",
    async (coding, compressed) => {
      const plain = JSON.stringify({ cryptos: ["BTC"] })
      const checked = await target.exchange({
        method: "POST",
        path: "/api/v1/exchange-rates",
        headers: [["Content-Type", "application/json"], ["Content-Encoding", coding]],
        body: compressed ? gzipSync(plain) : plain
      })
      expectNoViolations(checked, `Content-Encoding: ${coding}`)
      expect(checked.response.status).toBe(415)
      expect(jsonOf(checked.response).code).toBe("unsupported_media_type")
      expect(checked.response.headers["accept-encoding"]).toBe("identity")
    }
  )

  it("an encoded body on an unknown path is still a 404: the path decides before the coding", async () => {
    const checked = await target.exchange({
      method: "POST",
      path: "/api/v2/exchange-rates",
      headers: [["Content-Type", "application/json"], ["Content-Encoding", "gzip"]],
      body: gzipSync("{}")
    })
    expectNoViolations(checked, "gzip body on an unknown path")
    expect(checked.response.status).toBe(404)
  })

  // Found by token-form.test.ts: token errors carry `instance` (C7) but the document's OAuthError
  // schema said additionalProperties: false, so every token error contradicted the published contract.
  it("a token endpoint error body validates against the document's OAuthError schema", async () => {
    const checked = await target.exchange({
      method: "POST",
      path: "/oauth/token",
      headers: [["Content-Type", "application/x-www-form-urlencoded"]],
      body: "grant_type=client_credentials"
    })
    expect(checked.response.status).toBe(401)
    expect(jsonOf(checked.response).instance).toMatch(/^urn:uuid:/)
    expect(target.model.byId("requestToken").validateResponse(401, jsonOf(checked.response))).toEqual([])
  })
})
