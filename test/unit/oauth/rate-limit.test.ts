import { Effect, Logger } from "effect"
import { RateLimiter } from "effect/persistence"
import { afterEach, describe, expect, it } from "vitest"
import { makeFailureLimiter } from "../../../src/oauth/FailureLimiter.ts"
import { type TokenEndpointResponse, type TokenErrorBody, TokenEndpoint } from "../../../src/oauth/TokenEndpoint.ts"
import { consumeWithFallback } from "../../../src/platform/sharedRateLimiter.ts"
import { BASE, basic, FORM, makeFakeClock, memoryRuntime } from "../../support/oauth.ts"

const CLIENTS = [
  { name: "A", scopes: ["rates:read"], clientId: "client-a", secret: "secret-a" },
  { name: "B", scopes: ["rates:read"], clientId: "client-b", secret: "secret-b" }
]

const runtimes: Array<ReturnType<typeof memoryRuntime>> = []
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((r) => r.dispose()))
})

const setup = (limit = 10) => {
  const clock = makeFakeClock()
  const runtime = memoryRuntime({ clients: CLIENTS, maxFailuresPerMinute: limit, clock })
  runtimes.push(runtime)
  const call = (clientIp: string, authorization: string | undefined): Promise<TokenEndpointResponse> =>
    runtime.runPromise(Effect.flatMap(TokenEndpoint, (e) =>
      e.handle({ authorization, contentType: FORM, body: "grant_type=client_credentials", clientIp })))
  return { clock, call }
}

const expectLimited = (res: TokenEndpointResponse, retryAfter: number, policy: string, limit: number) => {
  expect(res.status).toBe(429)
  expect(res.headers["retry-after"]).toBe(String(retryAfter))
  expect(res.headers["content-type"]).toBe("application/json")
  expect(res.headers["cache-control"]).toBe("no-store")
  expect(res.headers["pragma"]).toBe("no-cache")
  expect(res.headers["ratelimit-policy"]).toBe(`"${policy}";q=${limit};w=60`)
  expect(res.headers["ratelimit"]).toBe(`"${policy}";r=0;t=${retryAfter}`)
  expect(res.headers["www-authenticate"]).toBeUndefined()
  const body = res.json as TokenErrorBody
  expect(body).toMatchObject({
    error: "invalid_request",
    code: "rate_limited",
    status: 429,
    type: `${BASE}/problems/rate_limited`
  })
}

describe("failure rate limiting on the token endpoint", () => {
  it("blocks a client from an address after `limit` failures, the right secret included, until the window frees", async () => {
    const { call, clock } = setup(10)
    for (let i = 0; i < 10; i++) {
      expect((await call("203.0.113.7", basic("client-a", `wrong-${i}`))).status).toBe(401)
      clock.advance(1000)
    }
    // Each failure holds the counter 6 s longer (60 s / 10): at t=10 s it frees at t=60 s.
    expectLimited(await call("203.0.113.7", basic("client-a", "secret-a")), 50, "oauth-client-failures", 10)
    // Another address, or another client from this one, is not affected.
    expect((await call("203.0.113.8", basic("client-a", "secret-a"))).status).toBe(200)
    expect((await call("203.0.113.7", basic("client-b", "secret-b"))).status).toBe(200)
    clock.advance(50_000)
    expect((await call("203.0.113.7", basic("client-a", "secret-a"))).status).toBe(200)
  })

  it("never blocks a client for failures from other addresses", async () => {
    const { call } = setup(3)
    for (let i = 0; i < 30; i++) expect((await call(`198.51.100.${i}`, basic("client-a", `wrong-${i}`))).status).toBe(401)
    expect((await call("198.51.100.200", basic("client-a", "secret-a"))).status).toBe(200)
  })

  it("blocks an address for every client at ten times the limit", async () => {
    const { call } = setup(2)
    for (let i = 0; i < 20; i++) expect((await call("192.0.2.1", basic(`guess-${i}`, "x"))).status).toBe(401)
    expectLimited(await call("192.0.2.1", basic("client-b", "secret-b")), 60, "oauth-address-failures", 20)
    expect((await call("192.0.2.2", basic("client-b", "secret-b"))).status).toBe(200)
  })

  it("counts unknown client ids like known ones (no enumeration through the limiter)", async () => {
    const { call } = setup(3)
    for (let i = 0; i < 3; i++) expect((await call("192.0.2.9", basic("no-such-client", "x"))).status).toBe(401)
    expectLimited(await call("192.0.2.9", basic("no-such-client", "x")), 60, "oauth-client-failures", 3)
  })

  it("counts malformed Basic credentials per address", async () => {
    const { call } = setup(1)
    for (let i = 0; i < 10; i++) expect((await call("203.0.113.9", "Basic !!!")).status).toBe(400)
    expect((await call("203.0.113.9", basic("client-a", "secret-a"))).status).toBe(429)
  })

  it("does not count successes or requests without credentials", async () => {
    const { call } = setup(1)
    for (let i = 0; i < 25; i++) expect((await call("203.0.113.10", basic("client-a", "secret-a"))).status).toBe(200)
    for (let i = 0; i < 25; i++) expect((await call("203.0.113.10", undefined)).status).toBe(401)
    expect((await call("203.0.113.10", basic("client-a", "secret-a"))).status).toBe(200)
  })

  it("groups IPv6 addresses by /64 and unwraps IPv4-mapped addresses", async () => {
    const { call } = setup(1)
    for (let i = 0; i < 10; i++) await call(`2001:db8:1:2::${i.toString(16)}`, basic(`x-${i}`, "y"))
    expect((await call("2001:db8:1:2:ffff::1", basic("client-a", "secret-a"))).status).toBe(429)
    expect((await call("2001:db8:1:3::1", basic("client-a", "secret-a"))).status).toBe(200)
    await call("::ffff:192.0.2.50", basic("client-a", "wrong"))
    expect((await call("192.0.2.50", basic("client-a", "secret-a"))).status).toBe(429)
  })
})

describe("a shared store that fails", () => {
  const failing: RateLimiter.RateLimiter = {
    [RateLimiter.TypeId]: RateLimiter.TypeId,
    consume: () => Effect.fail(new RateLimiter.RateLimiterError({ reason: new RateLimiter.RateLimitStoreError({ message: "down" }) })),
    adaptiveConsume: () => Effect.die("unused"),
    adaptiveFeedback: () => Effect.die("unused")
  }
  const memory = Effect.runSync(RateLimiter.make.pipe(Effect.provide(RateLimiter.layerStoreMemory)))

  it("is replaced by memory for as long as it fails, logged once", async () => {
    const logs: Array<unknown> = []
    const logger = Logger.layer([Logger.make(({ message }) => void logs.push(message))])
    const limiter = makeFailureLimiter(consumeWithFallback({ shared: failing, memory, label: "test limits" }), { limit: 2, windowSeconds: 60 })
    const run = <A>(e: Effect.Effect<A>) => Effect.runPromise(Effect.provide(e, logger))
    await run(limiter.recordFailure("192.0.2.1", "c"))
    await run(limiter.recordFailure("192.0.2.1", "c"))
    expect(await run(limiter.clientBlocked("192.0.2.1", "c"))).toMatchObject({ policy: "oauth-client-failures", limit: 2 })
    expect(logs.flat().filter((m) => String(m).includes("counting in memory"))).toHaveLength(1)
  })

  it("without a fallback, lets requests through rather than failing them", async () => {
    const limiter = makeFailureLimiter(failing.consume, { limit: 1, windowSeconds: 60 })
    await Effect.runPromise(limiter.recordFailure("192.0.2.1", "c"))
    expect(await Effect.runPromise(limiter.addressBlocked("192.0.2.1"))).toBeUndefined()
    expect(await Effect.runPromise(limiter.clientBlocked("192.0.2.1", "c"))).toBeUndefined()
  })
})
