/**
 * Unknown and known client ids must take the same time to reject (CONTRACT C6). The presented secret is
 * made long so that hashing it dominates the cost: if unknown ids skipped the hash + compare, their
 * median would drop to the short-secret level and the ratio checks below would fail.
 */
import { Effect, Redacted } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { ClientRegistry } from "../../../src/oauth/ClientRegistry.ts"
import { TokenEndpoint } from "../../../src/oauth/TokenEndpoint.ts"
import { assertionFor, assertionForm, jwksOf, makeKey } from "../../support/assertionKit.ts"
import { BASE, basic, FORM, median, memoryRuntime } from "../../support/oauth.ts"

const clientKey = await makeKey("ES256", "known-key")
const runtime = memoryRuntime({
  clients: [
    { name: "Known", scopes: ["rates:read"], clientId: "known-client", secret: "the-real-secret" },
    { name: "Keyed", scopes: ["rates:read"], clientId: "known-keyed", keys: { jwks: jwksOf(clientKey) } }
  ],
  maxFailuresPerMinute: 1_000_000
})
afterAll(() => runtime.dispose())
const registry = await runtime.runPromise(ClientRegistry)
const endpoint = await runtime.runPromise(TokenEndpoint)

const timeOf = async (run: () => Promise<unknown>): Promise<number> => {
  const start = process.hrtime.bigint()
  await run()
  return Number(process.hrtime.bigint() - start) / 1e6
}

/** Interleaves the cases so that drift (GC, JIT, other workers) hits all of them alike. */
const medians = async (cases: ReadonlyArray<() => Promise<unknown>>, rounds: number) => {
  const samples = cases.map(() => [] as Array<number>)
  for (let warm = 0; warm < 50; warm++) for (const c of cases) await c()
  for (let i = 0; i < rounds; i++) {
    for (const [j, c] of cases.entries()) samples[j]!.push(await timeOf(c))
  }
  return samples.map(median)
}

describe("constant-time client authentication", () => {
  it("registry.authenticate: unknown id ≈ known id with wrong secret, and hashing is what costs", async () => {
    const long = Redacted.make("w".repeat(256 * 1024))
    const short = Redacted.make("w")
    const auth = (id: string, secret: Redacted.Redacted<string>) => () =>
      Effect.runPromise(Effect.flip(registry.authenticate(id, secret)))
    const [unknown, known, knownShort] = await medians(
      [auth("no-such-client", long), auth("known-client", long), auth("known-client", short)],
      200
    )
    // Sanity: the long secret makes hashing dominant, so a skipped hash would show.
    expect(known!).toBeGreaterThan(knownShort! * 2)
    const ratio = unknown! / known!
    expect(ratio).toBeGreaterThan(0.75)
    expect(ratio).toBeLessThan(1.33)
  })

  it("TokenEndpoint.handle: unknown id and known id with wrong secret have close medians over 200 calls", async () => {
    const call = (authorization: string) => () =>
      Effect.runPromise(endpoint.handle({ authorization, contentType: FORM, body: "grant_type=client_credentials", clientIp: "127.0.0.1" }))
    const secret = "x".repeat(8 * 1024)
    const [unknown, known] = await medians([call(basic("no-such-client", secret)), call(basic("known-client", secret))], 200)
    // Tolerant: the check guards against gross differences (a slow path for one kind of id).
    expect(Math.abs(unknown! - known!)).toBeLessThan(Math.max(0.3 * Math.max(unknown!, known!), 0.05))
  })

  it("private_key_jwt: an unknown client and a known one with a bad signature have close medians (each costs one verification)", async () => {
    const stranger = await makeKey("ES256", "known-key")
    const call = (body: string) => () => Effect.runPromise(endpoint.handle({ authorization: undefined, contentType: FORM, body, clientIp: "127.0.0.1" }))
    const forged = assertionForm(await assertionFor(stranger, "known-keyed", { nowMs: Date.now(), audience: BASE, claims: { exp: Math.floor(Date.now() / 1000) + 300 } }))
    const unknown = assertionForm(await assertionFor(stranger, "no-such-keyed", { nowMs: Date.now(), audience: BASE, claims: { exp: Math.floor(Date.now() / 1000) + 300 } }))
    expect((await call(forged)()).outcome.reason).toBe("bad_signature")
    expect((await call(unknown)()).outcome.reason).toBe("unknown_client")
    const [unknownMs, knownMs] = await medians([call(unknown), call(forged)], 200)
    expect(Math.abs(unknownMs! - knownMs!)).toBeLessThan(Math.max(0.3 * Math.max(unknownMs!, knownMs!), 0.05))
  })
})
