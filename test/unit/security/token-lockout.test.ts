/**
 * Issue 14, finding 3, over real HTTP: anyone knowing a client id locked that client out. Ten wrong
 * secrets from one address, then the right secret from another address: 429, renewable for ever.
 * C6: failures are limited per address and per (address, client) pair; someone else's failures never
 * refuse a client's right secret.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { basic, startTestApp, type TestApp, testOAuth } from "../../support/app.ts"

/** Failures allowed per (address, client) pair; an address gets ten times that. */
const LIMIT = 3

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { TRUST_PROXY: "true" }, oauth: testOAuth({ maxFailuresPerMinute: LIMIT }) })
})
afterAll(() => app.close())

const token = (address: string, id: string, secret: string) =>
  fetch(`${app.url}/oauth/token`, {
    method: "POST",
    headers: { authorization: basic(id, secret), "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": address },
    body: "grant_type=client_credentials"
  })

const statuses = async (requests: ReadonlyArray<readonly [address: string, id: string, secret: string]>) => {
  const out: Array<number> = []
  for (const [address, id, secret] of requests) {
    const res = await token(address, id, secret)
    await res.body?.cancel()
    out.push(res.status)
  }
  return out
}

const wrong = (address: string, id: string, n: number) =>
  Array.from({ length: n }, (_, i) => [address, id, `wrong-${i}`] as const)

const expectLimited = async (res: Response, policy: string, limit: number) => {
  expect(res.status).toBe(429)
  expect(res.headers.get("content-type")).toBe("application/json")
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0)
  expect(res.headers.get("ratelimit-policy")).toBe(`"${policy}";q=${limit};w=60`)
  const body = await res.json()
  expect(body).toMatchObject({ error: "invalid_request", code: "rate_limited", status: 429 })
}

describe("failed token requests are limited per address and per (address, client)", () => {
  it("the attacker's failures never refuse the client's right secret from its own address", async () => {
    expect(await statuses(wrong("198.51.100.1", "svc-all", LIMIT))).toEqual(Array(LIMIT).fill(401))
    // Before the fix: 429 for 60 s (and renewable), whoever asked.
    expect(await statuses([["203.0.113.1", "svc-all", "secret-all"]])).toEqual([200])
  })

  it("the attacking address stays refused for that client, the right secret included", async () => {
    expect(await statuses(wrong("198.51.100.2", "svc-all", LIMIT))).toEqual(Array(LIMIT).fill(401))
    await expectLimited(await token("198.51.100.2", "svc-all", "secret-all"), "oauth-client-failures", LIMIT)
    // Another client from the same address is not refused: one client's failures are its own.
    expect(await statuses([["198.51.100.2", "svc-health", "secret-health"]])).toEqual([200])
  })

  it("an address guessing across many client ids is refused for every client at ten times the limit", async () => {
    const guesses = Array.from({ length: LIMIT * 10 }, (_, i) => ["198.51.100.3", `guess-${i}`, "x"] as const)
    expect(await statuses(guesses)).toEqual(Array(LIMIT * 10).fill(401))
    await expectLimited(await token("198.51.100.3", "svc-health", "secret-health"), "oauth-address-failures", LIMIT * 10)
    expect(await statuses([["203.0.113.3", "svc-health", "secret-health"]])).toEqual([200])
  })

  it("IPv6 callers count per /64, IPv4-mapped ones as their IPv4 address", async () => {
    expect(await statuses(wrong("2001:db8:5:6::1", "svc-all", LIMIT))).toEqual(Array(LIMIT).fill(401))
    expect(await statuses([["2001:db8:5:6:ffff::2", "svc-all", "secret-all"]])).toEqual([429])
    expect(await statuses(wrong("::ffff:192.0.2.77", "svc-all", LIMIT))).toEqual(Array(LIMIT).fill(401))
    expect(await statuses([["192.0.2.77", "svc-all", "secret-all"]])).toEqual([429])
  })
})
