/**
 * Issue 17: the edge answers unknown paths (404) and anonymous small JSON bodies that do not parse or
 * decode (400) itself, from problems made of precomputed parts. Every byte stays what the HttpApi
 * wrote: each answer is compared with the one captured before the change (test/unit/http/edge-bytes.ts,
 * fixtures/edge-bytes.json; header order aside, which an earlier edge change set), and the 400s with
 * the same body sent with a valid token, which the HttpApi still decodes.
 */
import { readFileSync } from "node:fs"
import { Agent, request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, tokenFor } from "../../support/app.ts"
import { exchange, rawCases, requestId } from "./edge-bytes.ts"

const before: Record<string, string> = JSON.parse(readFileSync(new URL("fixtures/edge-bytes.json", import.meta.url), "utf8"))

/** Status line, header lines sorted, body: what a client can tell apart. */
const normalised = (answer: string) => {
  const split = answer.indexOf("\r\n\r\n")
  const [status, ...headers] = answer.slice(0, split).split("\r\n")
  return { status, headers: headers.map((h) => h.toLowerCase()).sort(), body: answer.slice(split + 4) }
}

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

describe("the same answers as before the edge gave them itself", () => {
  it("has a captured answer for every case", () => {
    expect(Object.keys(before).sort()).toEqual(rawCases.map((c) => c.name).sort())
  })
  for (const c of rawCases) {
    it(c.name, async () => {
      expect(normalised(await exchange(app.url, c))).toEqual(normalised(before[c.name]!))
    })
  }
})

describe("400s at the edge and through the HttpApi (a token's request): the same body", () => {
  const bodies: ReadonlyArray<readonly [string, string]> = [
    ["/api/v1/exchange-rates", "{\"cryptos\":[\"BTC\","],
    ["/api/v1/exchange-rates", "{\"cryptos\":[]}"],
    ["/api/v1/exchange-rates", "{\"cryptos\":[\"BTC\",\"B TC\",\"\",7],\"days\":\"7\",\"currency\":\"u\"}"],
    ["/api/v1/exchange-rates", JSON.stringify({ cryptos: Array.from({ length: 30 }, (_, i) => `bad ${"~/".repeat(i)}`) })],
    ["/api/v1/exchange-rates", "[1,2]"],
    ["/api/subscribe", "nope"],
    ["/api/subscribe", "{\"locale\":\"de\",\"extra\":1,\"a/b~c\":2}"],
    ["/api/subscribe", "{\"email\":\"x\",\"locale\":\"en\"}"],
    ["/api/subscribe", JSON.stringify({ email: "a".repeat(300) + "@example.com", locale: "en" })]
  ]
  let token: string
  beforeAll(async () => {
    token = await tokenFor(app, "svc-all", "secret-all")
  })
  const post = async (path: string, body: string, headers: Record<string, string> = {}) => {
    const res = await fetch(app.url + path, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": requestId, ...headers },
      body
    })
    return { status: res.status, type: res.headers.get("content-type"), body: await res.text() }
  }
  for (const [path, body] of bodies) {
    it(`${path} ${body.slice(0, 60)}`, async () => {
      const anonymous = await post(path, body)
      expect(anonymous.status).toBe(400)
      expect(await post(path, body, { authorization: `Bearer ${token}` })).toEqual(anonymous)
    })
  }
  const queries = [
    "",
    "?cryptos=BTC,B%20TC,&days=0&currency=u",
    "?cryptos=BTC&cryptos=ETH",
    "?days=366&cryptos=" + Array.from({ length: 55 }, (_, i) => `s${"~/".repeat(i % 3)}${i}`).join(","),
    "?cryptos=%zz&days=%31%2E5"
  ]
  const get = async (target: string, headers: Record<string, string> = {}) => {
    const res = await fetch(app.url + target, { headers: { "x-request-id": requestId, ...headers } })
    return { status: res.status, type: res.headers.get("content-type"), body: await res.text() }
  }
  for (const query of queries) {
    it(`GET /api/v1/rates${query.slice(0, 60)}`, async () => {
      const anonymous = await get(`/api/v1/rates${query}`)
      expect(anonymous.status).toBe(400)
      expect(await get(`/api/v1/rates${query}`, { authorization: `Bearer ${token}` })).toEqual(anonymous)
    })
  }
})

describe("what the edge answers itself is counted, logged and leaves the connection usable", () => {
  it("a malformed body still counts against the rate limit, before it is read", async () => {
    const limited = await startTestApp({ env: { RATE_LIMIT_RATES_PER_MIN: "2" } })
    try {
      const post = (body: string) =>
        fetch(`${limited.url}/api/v1/exchange-rates`, { method: "POST", headers: { "content-type": "application/json" }, body })
      expect((await post("{")).status).toBe(400)
      expect((await post("{\"cryptos\":[]}")).status).toBe(400)
      const third = await post("{")
      expect(third.status).toBe(429)
      expect((await third.json()).code).toBe("rate_limited")
    } finally {
      await limited.close()
    }
  })

  it("404s and edge 400s get their access-log line and metrics label", async () => {
    const id = "6f1c0a7e-0d5b-4a3e-9c1f-7b2d4e6a8c90"
    expect((await fetch(`${app.url}/no/such/path?q=1`, { headers: { "x-request-id": id } })).status).toBe(404)
    const id2 = "6f1c0a7e-0d5b-4a3e-9c1f-7b2d4e6a8c91"
    const bad = await fetch(`${app.url}/api/subscribe`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": id2 },
      body: "{}"
    })
    expect(bad.status).toBe(400)
    await new Promise((r) => setTimeout(r, 20))
    expect(app.logs.filter((l) => l.requestId === id)).toEqual([expect.objectContaining({ method: "GET", path: "/no/such/path", status: 404 })])
    expect(app.logs.filter((l) => l.requestId === id2)).toEqual([expect.objectContaining({ method: "POST", path: "/api/subscribe", status: 400 })])
  })

  it("keep-alive: a 404 with an unread chunked body, a malformed body, then the next request, all answered", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const call = (method: string, path: string, body?: string, chunked = false) =>
      new Promise<number | string>((resolve) => {
        const headers: Record<string, string> = { "content-type": "application/json" }
        if (body !== undefined && !chunked) headers["content-length"] = String(Buffer.byteLength(body))
        const req = request(`${app.url}${path}`, { method, agent, headers }, (res) => {
          res.resume()
          res.on("end", () => resolve(res.statusCode!))
        })
        req.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message))
        if (body !== undefined) req.write(body)
        req.end()
      })
    try {
      const answers = await Promise.all([
        call("POST", "/nope", "x".repeat(300 * 1024), true),
        call("POST", "/api/v1/exchange-rates", "{\"cryptos\":"),
        call("POST", "/api/subscribe", "{}"),
        call("GET", "/api/health")
      ])
      expect(answers).toEqual([404, 400, 400, 200])
    } finally {
      agent.destroy()
    }
  })
})
