/**
 * Issue 14, finding 5, over real HTTP: requests with an invalid Bearer token each cost an ECDSA
 * verification, and were verified before any limit was counted. C6: a caller sending invalid tokens
 * counts in its address's anonymous tier, and limits are applied before a signature is verified.
 *
 * Verifications are counted where they happen: WebCrypto's `crypto.subtle.verify`, through which jose checks every
 * signature, watched (the service's own code path, the real keys and signatures; no module replaced, so this file
 * shares its worker's modules with the other unit files).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest"
import { startTestApp, type TestApp, tokenFor } from "../../support/app.ts"
import { expectProblem } from "../../support/problems.ts"

const verify = vi.spyOn(crypto.subtle, "verify")
const verifications = () => verify.mock.calls.length
afterAll(() => verify.mockRestore())

const ANONYMOUS_LIMIT = 5

let app: TestApp
let valid: string
let forged: string
beforeAll(async () => {
  app = await startTestApp({ env: { TRUST_PROXY: "true", RATE_LIMIT_SUBSCRIBE_PER_MIN: String(ANONYMOUS_LIMIT) } })
  valid = await tokenFor(app, "svc-all", "secret-all")
  // Same header and claims, another signature: only an ECDSA verification can tell.
  const [header, payload, signature] = valid.split(".") as [string, string, string]
  forged = `${header}.${payload}.${signature.startsWith("A") ? "B" : "A"}${signature.slice(1)}`
})
afterAll(() => app.close())
beforeEach(() => {
  verify.mockClear()
})

const subscribe = (address: string, token: string) =>
  fetch(`${app.url}/api/subscribe`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": address, authorization: `Bearer ${token}` },
    body: JSON.stringify({ email: "flood@example.com", locale: "en" })
  })

describe("a flood of invalid tokens", () => {
  it("is limited in the address's anonymous tier, and costs no verification once that tier is spent", async () => {
    const statuses: Array<number> = []
    for (let i = 0; i < 30; i++) {
      const res = await subscribe("198.51.100.20", forged)
      statuses.push(res.status)
      if (i === 0) await expectProblem(res, 401, "invalid_token")
      else await res.body?.cancel()
    }
    expect(statuses).toEqual([...Array(ANONYMOUS_LIMIT).fill(401), ...Array(30 - ANONYMOUS_LIMIT).fill(429)])
    expect(verifications()).toBe(ANONYMOUS_LIMIT)
  })

  it("429 is the anonymous tier's, with its RateLimit fields", async () => {
    const res = await subscribe("198.51.100.20", forged)
    await expectProblem(res, 429, "rate_limited")
    expect(res.headers.get("ratelimit-policy")).toBe(`"subscribe";q=${ANONYMOUS_LIMIT};w=60`)
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(verifications()).toBe(0)
  })
})

describe("a valid token", () => {
  it("moves its caller to the client tier (ten times the limit), verified on every request", async () => {
    const statuses: Array<number> = []
    let policy: string | null = null
    for (let i = 0; i < ANONYMOUS_LIMIT + 3; i++) {
      const res = await subscribe("198.51.100.21", valid)
      statuses.push(res.status)
      policy = res.headers.get("ratelimit-policy")
      await res.body?.cancel()
    }
    expect(statuses.every((s) => s === 200)).toBe(true)
    expect(policy).toBe(`"subscribe";q=${ANONYMOUS_LIMIT * 10};w=60`)
    expect(verifications()).toBe(ANONYMOUS_LIMIT + 3)
  })

  it("still reaches the client tier from an address whose anonymous tier a flood has spent", async () => {
    // The token is known to be valid (the previous test used it); the flood comes from the same address.
    for (let i = 0; i < ANONYMOUS_LIMIT + 5; i++) await (await subscribe("198.51.100.21", forged)).body?.cancel()
    verify.mockClear()
    expect((await subscribe("198.51.100.21", forged)).status).toBe(429)
    expect(verifications()).toBe(0)
    const res = await subscribe("198.51.100.21", valid)
    expect(res.status).toBe(200)
    expect(res.headers.get("ratelimit-policy")).toBe(`"subscribe";q=${ANONYMOUS_LIMIT * 10};w=60`)
    expect(verifications()).toBe(1)
  })
})
