/**
 * The HTTP surface fuzzed (http-surface-support.ts): random method tokens, CONNECT and OPTIONS on every path, and
 * every path spelled otherwise. Headers: http-surface-headers.test.ts; Authorization: http-surface-authorization.test.ts.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { oddUnicode } from "../../support/fuzz/arbitraries.ts"
import { expectNoViolations, fuzzParams } from "../../support/fuzz/harness.ts"
import { jsonOf, resolveTarget } from "../../support/fuzz/invariants.ts"
import { happyRequest } from "../../support/fuzz/happyRequest.ts"
import { knownPaths, METHODS, target, useSurfaceTarget, withHappyQuery } from "./http-surface-support.ts"

useSurfaceTarget()

// Every method on every path, one test each: test/unit/http/contract-methods.test.ts.
describe("methods", () => {
  it("random method tokens never reach a 5xx and 405s always carry Allow", async () => {
    const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/)
    await fc.assert(
      fc.asyncProperty(token, fc.constantFrom(...knownPaths().map((p) => p.path), "/x"), async (method, path) => {
        const checked = await target.exchangeBytes(`${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, { method, target: path, parserMayRefuse: true })
        expectNoViolations(checked, `${method} ${path}`)
      }),
      fuzzParams(80)
    )
  })

  it("CONNECT is refused by closing the connection (Node has no CONNECT handler)", async () => {
    const res = await target.exchangeBytes("CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", { method: "CONNECT", target: "/" }).catch((e: unknown) => e)
    expect(res instanceof Error || (res as { response: { status: number } }).response.status === 0).toBe(true)
  })

  it("preflight on a public operation gets 204; OPTIONS without the CORS headers gets 405 with Allow", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...knownPaths()), fc.option(fc.constantFrom("https://a.example", "null", "http://localhost:3000")), fc.option(fc.constantFrom(...METHODS.slice(0, 6))), async ({ path, methods }, origin, requested) => {
        const headers: Array<[string, string]> = []
        if (origin !== null) headers.push(["Origin", origin])
        if (requested !== null) headers.push(["Access-Control-Request-Method", requested])
        const checked = await target.exchange({ method: "OPTIONS", path, headers })
        const context = `OPTIONS ${path} origin=${origin} method=${requested}`
        expectNoViolations(checked, context)
        const isPublic = ["/api/health", "/api/v1/exchange-rates", "/api/v1/rates", "/api/v1/prices/stream", "/api/subscribe"].includes(path)
        const preflight = isPublic && origin !== null && requested !== null && methods.includes(requested)
        expect(checked.response.status, context).toBe(preflight ? 204 : 405)
      }),
      fuzzParams(60)
    )
  })
})

describe("path variants", () => {
  /** Percent-encodes the characters at the chosen positions (upper or lower hex). */
  const encodeAt = (path: string, positions: ReadonlyArray<number>, lower: boolean) =>
    [...path].map((ch, i) => {
      if (!positions.includes(i) || ch === "/") return ch
      const hex = [...Buffer.from(ch, "utf8")].map((b) => "%" + b.toString(16).padStart(2, "0")).join("")
      return lower ? hex.toLowerCase() : hex.toUpperCase()
    }).join("")

  type Variant = { readonly target: string; readonly equivalent: boolean; readonly kind: string }

  const variantOf = (path: string): fc.Arbitrary<Variant> =>
    fc.oneof(
      fc.constant({ target: path, equivalent: true, kind: "canonical" }),
      fc.tuple(fc.uniqueArray(fc.nat({ max: path.length - 1 }), { maxLength: 4 }), fc.boolean()).map(([positions, lower]) => ({
        // RFC 3986 §6.2.2.2: percent-encoded unreserved characters are equivalent to the characters.
        target: encodeAt(path, positions, lower),
        equivalent: true,
        kind: "percent-encoded unreserved"
      })),
      fc.constantFrom(
        { target: `${path}/`, equivalent: false, kind: "trailing slash" },
        { target: `${path}//`, equivalent: false, kind: "double trailing slash" },
        { target: `/${path}`, equivalent: false, kind: "leading double slash" },
        { target: path.replace("/", "//").replace(/^\/\/\//, "//"), equivalent: false, kind: "inner double slash" },
        { target: path.toUpperCase(), equivalent: path === path.toUpperCase(), kind: "upper case" },
        { target: path.replace(/\/([^/]+)$/, "/./$1"), equivalent: false, kind: "dot segment" },
        { target: path.replace(/\/([^/]+)$/, "/x/../$1"), equivalent: false, kind: "dot-dot segment" },
        { target: path.lastIndexOf("/") > 0 ? `${path.slice(0, path.lastIndexOf("/"))}%2F${path.slice(path.lastIndexOf("/") + 1)}` : `${path}%2Fx`, equivalent: false, kind: "encoded slash" },
        { target: `${path}%00`, equivalent: false, kind: "encoded NUL" },
        { target: `${path}%`, equivalent: false, kind: "truncated escape" },
        { target: `${path}%zz`, equivalent: false, kind: "invalid escape" },
        { target: `${path}%C0%AF`, equivalent: false, kind: "overlong UTF-8" },
        // effect's FindMyWay ends the path at ';' as at '?' (router.js): the same resource.
        { target: `${path};jsessionid=1`, equivalent: true, kind: "semicolon parameter" },
        { target: `${path}%20`, equivalent: false, kind: "encoded space" },
        { target: `${path}.json`, equivalent: false, kind: "extension" },
        { target: `${path}?`, equivalent: true, kind: "empty query" },
        { target: `${path}?a=%&b=%zz&%00=\u00e9`.replace("\u00e9", "%C3%A9"), equivalent: true, kind: "odd query" },
        { target: `${path}?${"q".repeat(4_000)}=1`, equivalent: true, kind: "long query" },
        { target: `http://example.test${path}`, equivalent: true, kind: "absolute form" }
      )
    )

  it("equivalent spellings reach the same resource; any other spelling is a 404 problem", async () => {
    const paths = knownPaths()
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...paths).chain((p) => fc.tuple(fc.constant(p), variantOf(p.path), fc.constantFrom(...p.methods, "DELETE"))),
        fc.option(fc.constantFrom("https://app.example", "null")),
        async ([known, variant, method], origin) => {
          const happy = happyRequest(known.path, method)
          // An Origin makes CORS decisions visible (none may be made for /oauth/token, C2).
          const headers = [...happy.headers, ...(origin === null ? [] : [["Origin", origin] as [string, string]])]
          const sent = withHappyQuery(variant.target, known.path)
          const checked = await target.exchange({ method, path: sent, headers, ...(happy.body === undefined ? {} : { body: happy.body }) })
          const context = `${method} ${sent} (${variant.kind} of ${known.path})`
          expectNoViolations(checked, context)
          const status = checked.response.status
          const resolved = resolveTarget(target.model, method, variant.target)
          if (variant.equivalent) expect(status, context).toBe(known.methods.includes(method) ? 200 : 405)
          else if (resolved.allowed !== undefined && !resolved.allowed.includes(method)) {
            // Still inside a template (/problems/{code} takes any code): the method decides first.
            expect(status, context).toBe(405)
          } else if (resolved.pageStatus !== undefined) {
            // Another page's own path (/docs/ redirects to /docs); another spelling of a problem code is no code.
            expect(status, context).toBe(resolved.template?.startsWith("/problems/") === true ? 404 : resolved.pageStatus)
          } else {
            expect(status, context).toBe(404)
            if (method !== "HEAD") expect(jsonOf(checked.response)?.code, context).toBe("not_found")
          }
        }
      ),
      fuzzParams(250)
    )
  })

  it("raw bytes in the request target (spaces, controls, non-ASCII) are refused without a crash", async () => {
    const odd = fc.oneof(
      fc.constantFrom("\u0000", "\t", "\u007f", "\u00ff", "é", "\\", "\"", "<", ">", "^", "`", "{", "|", "}", "#frag"),
      oddUnicode.filter((s) => s.length > 0)
    )
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...knownPaths().map((p) => p.path)), odd, async (path, insert) => {
        const pathWithInsert = path + insert
        const bytes = Buffer.concat([Buffer.from("GET "), Buffer.from(pathWithInsert, "utf8"), Buffer.from(" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")])
        const checked = await target.exchangeBytes(bytes, { method: "GET", target: pathWithInsert, parserMayRefuse: true })
        expectNoViolations(checked, `GET ${JSON.stringify(pathWithInsert)}`)
        // A byte the URL grammar forbids may be refused by Node or answered 404; never served as the path.
        if (checked.response.status === 200) expect(insert, `served ${JSON.stringify(pathWithInsert)}`).toMatch(/^#/)
      }),
      fuzzParams(80)
    )
  })
})
