/**
 * The specification's method table over real HTTP, with fakes behind: every path the service serves by every method.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { happyRequest } from "../../support/fuzz/happyRequest.ts"
import { expectNoViolations, type FuzzTarget, startFuzzTarget } from "../../support/fuzz/harness.ts"
import { resolveTarget } from "../../support/fuzz/invariants.ts"
import { expectProblem } from "../../support/problems.ts"

/**
 * The one method matrix: every path the service serves (the served OpenAPI document's, the documents, the probes, the
 * redirects) and two it does not, by every method Node's parser takes, each pair a test. Sent as raw HTTP (fetch refuses
 * TRACE) by the fuzz harness, which checks each answer against its invariants too (test/support/fuzz/invariants.ts).
 */
describe("every method on every path", () => {
  const routes: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["/api/health", ["GET", "HEAD"]],
    ["/api/v1/exchange-rates", ["POST"]],
    ["/api/v1/rates", ["GET", "HEAD"]],
    ["/api/v1/prices/stream", ["GET", "HEAD"]],
    ["/api/subscribe", ["POST"]],
    ["/oauth/token", ["POST"]],
    ["/.well-known/oauth-authorization-server", ["GET", "HEAD"]],
    ["/.well-known/jwks.json", ["GET", "HEAD"]],
    ["/openapi.json", ["GET", "HEAD"]],
    ["/docs", ["GET", "HEAD"]],
    ["/docs/", ["GET", "HEAD"]],
    ["/", ["GET", "HEAD"]],
    ["/favicon.ico", ["GET", "HEAD"]],
    ["/problems", ["GET", "HEAD"]],
    ["/problems/not_found", ["GET", "HEAD"]],
    ["/livez", ["GET", "HEAD"]],
    ["/readyz", ["GET", "HEAD"]],
    ["/widget.js", ["GET", "HEAD"]],
    ["/nope", []],
    ["/api", []]
  ]
  /** RFC 9110's methods, then others Node's parser knows: a refusal by the parser (bare 400) is allowed for those only. */
  const standard = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
  const methods = [...standard, "TRACE", "PROPFIND", "LINK", "PURGE", "QUERY", "SEARCH", "LOCK"]

  let target: FuzzTarget
  beforeAll(async () => {
    target = await startFuzzTarget()
  })
  afterAll(() => target.close())

  /** A request every operation answers 200 to (anonymous, fakes behind); a body on any other method but GET and HEAD. */
  const requestFor = (path: string, method: string): { headers: Array<[string, string]>; body?: string } => {
    if (method === "GET" || method === "HEAD") return { headers: [] }
    if (method !== "POST") return { headers: [["Content-Type", "text/plain;charset=UTF-8"]], body: "{}" }
    const happy = happyRequest(path, method)
    return happy.body === undefined ? { headers: [["Content-Type", "text/plain;charset=UTF-8"]], body: "{}" } : happy
  }

  it("names every path of the served OpenAPI document with its methods", () => {
    for (const path of Object.keys(target.model.doc.paths)) {
      const declared = target.model.methodsOf(path).flatMap((m) => (m === "GET" ? ["GET", "HEAD"] : [m]))
      expect(routes, path).toContainEqual([path, declared])
    }
  })

  for (const [path, allowed] of routes) {
    for (const method of methods) {
      const outcome = allowed.length === 0 ? "404" : allowed.includes(method) ? "answered" : `405 with Allow: ${allowed.join(", ")}`
      it(`${method} ${path} → ${outcome}`, async () => {
        const request = requestFor(path, method)
        // The GET of the rates needs its query to be answered (the path is the same either way).
        // The price stream's 200 never ends: an unknown symbol's 400, refused by the operation, shows the method is its.
        const sent = path === "/api/v1/rates" ? `${path}?cryptos=BTC` : path === "/api/v1/prices/stream" ? `${path}?cryptos=NOPE` : path
        const checked = await target.exchange({ method, path: sent, ...request, parserMayRefuse: !standard.includes(method) })
        const context = `${method} ${path}`
        expectNoViolations(checked, context)
        const { status, headers, body } = checked.response
        if (allowed.length === 0) return void expect([404, 400], context).toContain(status)
        if (allowed.includes(method)) {
          return void expect(status, context).toBe(path === "/api/v1/prices/stream" ? 400 : resolveTarget(target.model, method, path).pageStatus ?? 200)
        }
        // Only Node's parser may refuse, bodiless, a method it knows but RFC 9110 does not define.
        if (!standard.includes(method) && status === 400 && body.length === 0) return
        expect(status, context).toBe(405)
        expect(headers.allow, context).toBe(allowed.join(", "))
        if (method === "HEAD") return void expect(body.length, context).toBe(0)
        const res = new Response(checked.response.text, { status, headers })
        if (path !== "/oauth/token") return void await expectProblem(res, 405, "method_not_allowed")
        // C6: the token endpoint's errors are OAuth JSON, the problem members included.
        expect(res.headers.get("content-type")).toBe("application/json")
        expect(await res.json()).toMatchObject({ error: "invalid_request", code: "method_not_allowed", status: 405 })
      })
    }
  }
})
