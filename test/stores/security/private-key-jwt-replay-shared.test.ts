/**
 * Issue 34: a client assertion is used once across every instance (CONTRACT C6, RFC 7523 §3 item 7).
 * Two servers share one Redis (REDIS_URL, a key prefix of their own): an assertion that got a token at
 * the first is refused at the second, and counted there by the failure limiter. Without the shared store
 * (the control) the second instance would have accepted it: that is what the Redis store is for.
 */
import { randomUUID } from "node:crypto"
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { JtiStore } from "../../../src/oauth/assertion/JtiStore.ts"
import { startTestApp, type TestApp, testOAuth } from "../../support/app.ts"
import { assertionFor, assertionForm, type ClientKey, jwksOf, makeKey } from "../../support/assertionKit.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const ISSUER = "https://api.example.test"
const apps: Array<TestApp> = []
let key: ClientKey

const start = async (shared: boolean, env: Record<string, string>) => {
  const app = await startTestApp({
    env,
    oauth: testOAuth({
      maxFailuresPerMinute: 1,
      clients: [{ name: "Keyed", clientId: "keyed", scopes: ["rates:read"], keys: { jwks: jwksOf(key) } }],
      ...(shared ? { jtiStore: JtiStore.layerRedis.pipe(Layer.provide(NodeRedis.layer({ url: redisUrl }))) } : {})
    })
  })
  apps.push(app)
  return app
}

beforeAll(async () => {
  key = await makeKey("ES256")
})
afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()))
})

const post = (app: TestApp, assertion: string) =>
  fetch(`${app.url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: assertionForm(assertion)
  }).then(async (res) => ({ status: res.status, body: await res.json() }))

describe("a replayed assertion at another instance", () => {
  it("is refused when the instances share Redis, and counted by the failure limiter there", async () => {
    const env = { REDIS_KEY_PREFIX: `test-${randomUUID()}:` }
    const [a, b] = [await start(true, env), await start(true, env)]
    const assertion = await assertionFor(key, "keyed", { nowMs: Date.now(), audience: ISSUER })
    expect((await post(a!, assertion)).status).toBe(200)
    const replayed = await post(b!, assertion)
    expect(replayed.status).toBe(401)
    expect(replayed.body.error).toBe("invalid_client")
    // Counted (limit 1): the client's next, fresh assertion from this address is refused for a while.
    const fresh = await post(b!, await assertionFor(key, "keyed", { nowMs: Date.now(), audience: ISSUER }))
    expect(fresh.status).toBe(429)
    // At the first instance too, the replay is refused (its memory, and Redis).
    expect((await post(a!, assertion)).status).toBe(401)
  })

  it("control: without the shared store the second instance would have issued a second token", async () => {
    const [a, b] = [await start(false, {}), await start(false, {})]
    const assertion = await assertionFor(key, "keyed", { nowMs: Date.now(), audience: ISSUER })
    expect((await post(a!, assertion)).status).toBe(200)
    expect((await post(b!, assertion)).status).toBe(200)
  })
})
