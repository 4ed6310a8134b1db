/**
 * Issue 34, rotation without the operator, and the limits of a jwks_uri fetch (CONTRACT C6): the client
 * publishes a new key and drops the old one; an assertion signed with the new key is accepted within a
 * minute (an unknown kid fetches the set again, at most once a minute), the old key is refused once the
 * held set ends (replaced by that fetch, or expired per Cache-Control, clamped to 5 min..24 h). On a clock
 * the test moves; the JWKS is served over real HTTP.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { TokenEndpoint } from "../../../src/oauth/TokenEndpoint.ts"
import { cacheLifetimeMs, MAX_JWKS_BYTES } from "../../../src/oauth/jwksUri/RemoteJwks.ts"
import { assertionFor, assertionForm, type ClientKey, jwksOf, makeKey, serveJwks } from "../../support/assertionKit.ts"
import { BASE, FORM, makeFakeClock, memoryRuntime } from "../../support/oauth.ts"

const clock = makeFakeClock()
let server: Awaited<ReturnType<typeof serveJwks>>
let runtime: ReturnType<typeof memoryRuntime>
let first: ClientKey
let second: ClientKey
let third: ClientKey

beforeAll(async () => {
  ;[first, second, third] = await Promise.all([makeKey("ES256", "key-1"), makeKey("EdDSA", "key-2"), makeKey("PS256", "key-3")])
  server = await serveJwks(jwksOf(first), { "cache-control": "public, max-age=600" })
  runtime = memoryRuntime({
    clients: [{ name: "Rotating", clientId: "rotating", scopes: ["rates:read"], keys: { jwksUri: server.url } }],
    maxFailuresPerMinute: 1000,
    clock
  })
})
afterAll(async () => {
  await runtime?.dispose()
  await server?.close()
})

const reasonFor = async (key: ClientKey) => {
  const assertion = await assertionFor(key, "rotating", { nowMs: clock.now(), audience: BASE })
  const res = await runtime.runPromise(Effect.flatMap(TokenEndpoint, (endpoint) =>
    endpoint.handle({ authorization: undefined, contentType: FORM, body: assertionForm(assertion), clientIp: "192.0.2.1" })))
  return res.outcome.reason
}

describe("a jwks_uri client rotates its keys", () => {
  it("the new key is accepted within a minute, the old one refused from then on; no operator action", async () => {
    expect(await reasonFor(first)).toBe("ok")
    expect(server.fetches()).toBe(1)
    server.publish(jwksOf(second))

    clock.advance(10_000)
    // Fetched less than a minute ago: not fetched again, the new kid is unknown yet.
    expect(await reasonFor(second)).toBe("unknown_kid")
    expect(server.fetches()).toBe(1)
    expect(await reasonFor(first)).toBe("ok")

    clock.advance(51_000)
    expect(await reasonFor(second)).toBe("ok")
    expect(server.fetches()).toBe(2)
    // The set now held has no key-1.
    expect(await reasonFor(first)).toBe("unknown_kid")
    expect(server.fetches()).toBe(2)
  })

  it("a dropped key stops working when the held set expires (max-age 600 s), with no unknown kid to prompt it", async () => {
    server.publish(jwksOf(third), { "cache-control": "max-age=600" })
    clock.advance(590_000)
    expect(await reasonFor(second)).toBe("ok")
    clock.advance(11_000)
    expect(await reasonFor(second)).toBe("unknown_kid")
    expect(await reasonFor(third)).toBe("ok")
  })

  it("assertions naming unknown kids fetch at most once a minute", async () => {
    const before = server.fetches()
    for (let i = 0; i < 5; i++) expect(await reasonFor(first)).toBe("unknown_kid")
    expect(server.fetches() - before).toBeLessThanOrEqual(1)
  })
})

describe("what a jwks_uri may answer", () => {
  it("Cache-Control max-age is clamped to 5 minutes..24 hours; none, no-store or no-cache is 5 minutes", () => {
    expect(cacheLifetimeMs("max-age=10")).toBe(300_000)
    expect(cacheLifetimeMs("public, max-age=3600")).toBe(3_600_000)
    expect(cacheLifetimeMs("max-age=999999")).toBe(86_400_000)
    expect(cacheLifetimeMs(undefined)).toBe(300_000)
    expect(cacheLifetimeMs("no-store, max-age=3600")).toBe(300_000)
    expect(cacheLifetimeMs("no-cache")).toBe(300_000)
  })

  it("a document over 64 KiB is refused, declared or not, and so is one that is no JWK Set", async () => {
    const padded = JSON.stringify({ ...jwksOf(third), padding: "x".repeat(MAX_JWKS_BYTES) })
    for (const [raw, headers] of [[padded, {}], [padded, { "transfer-encoding": "chunked" }], ["<html>", {}], ['{"keys": "no"}', {}]] as const) {
      server.publish(jwksOf(third), headers)
      server.publishRaw(raw)
      clock.advance(UNTIL_EXPIRED)
      expect(await reasonFor(third)).toBe("jwks_unavailable")
    }
    // A failure is remembered for 10 s, then the fixed document serves.
    server.publish(jwksOf(third))
    expect(await reasonFor(third)).toBe("jwks_unavailable")
    clock.advance(10_001)
    expect(await reasonFor(third)).toBe("ok")
  })
})

/** Past any held set or remembered failure. */
const UNTIL_EXPIRED = 25 * 3600_000
