import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { ipKey, makeMemoryFailureLimiter } from "../../src/oauth/FailureLimiter.ts"
import { type TokenEndpointResponse, type TokenErrorBody, TokenEndpoint } from "../../src/oauth/TokenEndpoint.ts"
import { BASE, basic, FORM, makeFakeClock, memoryRuntime } from "./helpers.ts"

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

const expectLimited = (res: TokenEndpointResponse, retryAfter: number) => {
  expect(res.status).toBe(429)
  expect(res.headers["retry-after"]).toBe(String(retryAfter))
  expect(res.headers["content-type"]).toBe("application/json")
  expect(res.headers["cache-control"]).toBe("no-store")
  expect(res.headers["pragma"]).toBe("no-cache")
  expect(res.headers["ratelimit-policy"]).toBe('"oauth-failures";q=10;w=60')
  expect(res.headers["ratelimit"]).toBe(`"oauth-failures";r=0;t=${retryAfter}`)
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
  it("blocks an address after 10 failures in a minute, even with correct credentials, until the window frees", async () => {
    const { call, clock } = setup()
    for (let i = 0; i < 10; i++) {
      expect((await call("203.0.113.7", basic(`guess-${i}`, "x"))).status).toBe(401)
      clock.advance(1000)
    }
    // 10 failures at t=0..9 s; now t=10 s: the oldest leaves the window at t=60 s.
    expectLimited(await call("203.0.113.7", basic("client-a", "secret-a")), 50)
    // Another address is not affected.
    expect((await call("203.0.113.8", basic("client-a", "secret-a"))).status).toBe(200)
    clock.advance(50_000)
    expect((await call("203.0.113.7", basic("client-a", "secret-a"))).status).toBe(200)
  })

  it("blocks a client id after 10 failures from many addresses; other clients are unaffected", async () => {
    const { call, clock } = setup()
    for (let i = 0; i < 10; i++) expect((await call(`198.51.100.${i}`, basic("client-a", `wrong-${i}`))).status).toBe(401)
    expectLimited(await call("198.51.100.200", basic("client-a", "secret-a")), 60)
    expect((await call("198.51.100.201", basic("client-b", "secret-b"))).status).toBe(200)
    clock.advance(60_000)
    expect((await call("198.51.100.202", basic("client-a", "secret-a"))).status).toBe(200)
  })

  it("counts unknown client ids like known ones (no enumeration through the limiter)", async () => {
    const { call } = setup()
    for (let i = 0; i < 10; i++) await call(`192.0.2.${i}`, basic("no-such-client", "x"))
    expectLimited(await call("192.0.2.100", basic("no-such-client", "x")), 60)
  })

  it("counts malformed Basic credentials per address", async () => {
    const { call } = setup()
    for (let i = 0; i < 10; i++) expect((await call("203.0.113.9", "Basic !!!")).status).toBe(400)
    expect((await call("203.0.113.9", basic("client-a", "secret-a"))).status).toBe(429)
  })

  it("does not count successes or requests without credentials", async () => {
    const { call } = setup()
    for (let i = 0; i < 25; i++) expect((await call("203.0.113.10", basic("client-a", "secret-a"))).status).toBe(200)
    for (let i = 0; i < 25; i++) expect((await call("203.0.113.10", undefined)).status).toBe(401)
    expect((await call("203.0.113.10", basic("client-a", "secret-a"))).status).toBe(200)
  })

  it("groups IPv6 addresses by /64 and unwraps IPv4-mapped addresses", async () => {
    const { call } = setup()
    for (let i = 0; i < 10; i++) await call(`2001:db8:1:2::${i.toString(16)}`, basic("x", "y"))
    expect((await call("2001:db8:1:2:ffff::1", basic("client-a", "secret-a"))).status).toBe(429)
    expect((await call("2001:db8:1:3::1", basic("client-a", "secret-a"))).status).toBe(200)
    expect(ipKey("::ffff:192.0.2.1")).toBe(ipKey("192.0.2.1"))
    expect(ipKey("2001:DB8:0001:0002::1")).toBe(ipKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd"))
    expect(ipKey("::1")).toBe("ip:0:0:0:0::/64")
    expect(ipKey("fe80::1%eth0")).toBe(ipKey("fe80::2"))
  })
})

describe("makeMemoryFailureLimiter", () => {
  it("slides the window per key and bounds memory by evicting the least recently failed key", async () => {
    const clock = makeFakeClock()
    const limiter = makeMemoryFailureLimiter({ limit: 2, windowSeconds: 10, maxKeys: 2 })
    const run = <A>(e: Effect.Effect<A>) => Effect.runPromise(Effect.provide(e, clock.layer))
    await run(limiter.recordFailure("a"))
    clock.advance(4000)
    await run(limiter.recordFailure("a"))
    expect(await run(limiter.status("a"))).toEqual({ blocked: true, retryAfterSeconds: 6 })
    clock.advance(6000)
    expect(await run(limiter.status("a"))).toEqual({ blocked: false })
    await run(limiter.recordFailure("a"))
    expect((await run(limiter.status("a"))).blocked).toBe(true)
    // Two more keys: "a" is the least recently failed and is evicted.
    await run(limiter.recordFailure("b"))
    await run(limiter.recordFailure("c"))
    expect(await run(limiter.status("a"))).toEqual({ blocked: false })
  })
})
