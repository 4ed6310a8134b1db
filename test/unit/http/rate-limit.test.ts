/**
 * CONTRACT C8 rate limits over real HTTP: per-IP for anonymous callers, ten times that per client
 * with a token, 429 problems with Retry-After and the IETF RateLimit fields.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, tokenFor } from "../../support/app.ts"
import { expectProblem } from "../../support/problems.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SUBSCRIBE_PER_MIN: "3", TRUST_PROXY: "true" } })
})
afterAll(() => app.close())

const subscribe = (ip: string, headers: Record<string, string> = {}) =>
  fetch(`${app.url}/api/subscribe`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": ip, ...headers },
    body: JSON.stringify({ email: "rl@example.com", locale: "en" })
  })

describe("rate limits", () => {
  it("allows the anonymous quota per IP, then answers 429 with Retry-After and RateLimit fields", async () => {
    const statuses: Array<number> = []
    for (let i = 0; i < 3; i++) {
      const res = await subscribe("203.0.113.1")
      statuses.push(res.status)
      expect(res.headers.get("ratelimit-policy")).toBe(`"subscribe";q=3;w=60`)
      expect(res.headers.get("ratelimit")).toMatch(new RegExp(`^"subscribe";r=${2 - i};t=\\d+$`))
    }
    expect(statuses).toEqual([200, 200, 200])
    const limited = await subscribe("203.0.113.1")
    const retryAfter = Number(limited.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(60)
    const t = Number(/t=(\d+)/.exec(limited.headers.get("ratelimit") ?? "")?.[1])
    expect(retryAfter).toBeGreaterThanOrEqual(t)
    expect(limited.headers.get("ratelimit")).toMatch(/^"subscribe";r=0;/)
    const body = await expectProblem(limited, 429, "rate_limited")
    expect(body.retryAfter).toBe(retryAfter)
  })

  it("counts each IP on its own (TRUST_PROXY reads X-Forwarded-For)", async () => {
    expect((await subscribe("203.0.113.2")).status).toBe(200)
  })

  it("never limits health, nor reads its Authorization (C3: a probe gets 200, never 429 or 401)", async () => {
    for (let i = 0; i < 20; i++) {
      const ok = await fetch(`${app.url}/api/health`, {
        headers: { "x-forwarded-for": "203.0.113.1", ...(i % 2 === 0 ? { authorization: "Bearer not-a-token" } : {}) }
      })
      expect(ok.status).toBe(200)
      expect(ok.headers.get("ratelimit-policy")).toBeNull()
      expect(ok.headers.get("ratelimit")).toBeNull()
    }
  })

  it("gives a token ten times the anonymous quota, per client", async () => {
    const token = await tokenFor(app, "svc-all", "secret-all")
    const statuses: Array<number> = []
    for (let i = 0; i < 31; i++) statuses.push((await subscribe("203.0.113.9", { authorization: `Bearer ${token}` })).status)
    expect(statuses.slice(0, 30).every((s) => s === 200)).toBe(true)
    expect(statuses[30]).toBe(429)
  })
})
