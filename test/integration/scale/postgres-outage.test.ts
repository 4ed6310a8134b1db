/**
 * PostgreSQL stopped under a running instance (issue 16, C3 /readyz): a private cluster (pg_ctl in a
 * temp directory, never the shared server) is stopped and started again. Throughout, the instance
 * answers what it can from memory — health, cached rates, tokens issued and verified with the
 * clients and keys it holds — reports the outage on /readyz (503), and recovers by itself: ready
 * again, and following changes again.
 */
import { Effect, Exit, Layer, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../../src/config/AppConfig.ts"
import { Readiness } from "../../../src/lifecycle/Readiness.ts"
import { OAuthDatabase } from "../../../src/oauth/store/Database.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { configFrom } from "../../support/config.ts"
import { type ServiceProcess, spawnService } from "../../support/spawn.ts"
import { clientsCli, requestToken, sleep, startPostgres, within } from "../../support/privateServers.ts"

let emulator: CoinGeckoEmulator
let pg: Awaited<ReturnType<typeof startPostgres>>
let service: ServiceProcess
beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1" })
  pg = await startPostgres()
}, 60_000)
afterAll(async () => {
  await service?.stop("SIGKILL")
  await emulator?.close()
  await pg?.remove()
})

const body = JSON.stringify({ cryptos: ["BTC", "ETH"], days: 7 })
const rates = (token?: string) =>
  fetch(`${service.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    body,
    signal: AbortSignal.timeout(5_000)
  }).then((r) => r.status, () => "no answer")
const get = (path: string) => fetch(`${service.url}${path}`, { signal: AbortSignal.timeout(5_000) }).then((r) => r.status, () => "no answer")

describe("a PostgreSQL outage under a running instance", () => {
  it("serves what it holds in memory, reports 503 on /readyz, and recovers by itself", async () => {
    const env = { DATABASE_URL: pg.url, PUBLIC_BASE_URL: "https://api.example.test", COINGECKO_BASE_URL: emulator.url, RATE_LIMIT_RATES_PER_MIN: "100000" }
    service = await spawnService(env)
    const client = await clientsCli(["create", "--name", "outage", "--scope", "rates:read"], { DATABASE_URL: pg.url })
    const { token } = await within(2_000, async () => (await requestToken(service, client.client_id, client.client_secret)).status === 200)
      .then(() => requestToken(service, client.client_id, client.client_secret))
    expect(await rates()).toBe(200)
    expect(await rates(token)).toBe(200)
    expect(await get("/readyz")).toBe(200)

    await pg.stop()
    const during: Array<unknown> = []
    const until = Date.now() + 3_000
    while (Date.now() < until) {
      during.push(
        await get("/api/health"),
        await rates(),
        await rates(token),
        (await requestToken(service, client.client_id, client.client_secret)).status
      )
    }
    expect(new Set(during)).toEqual(new Set([200]))
    expect(await get("/readyz")).toBe(503)
    const problem = await fetch(`${service.url}/readyz`).then((r) => r.json())
    expect(problem.detail).toMatch(/postgresql/)

    await pg.start()
    await within(10_000, async () => (await get("/readyz")) === 200)
    // Following changes again: a revocation made now reaches the instance.
    await clientsCli(["revoke", client.client_id], { DATABASE_URL: pg.url })
    await within(2_000, async () => (await rates(token)) === 401)
    expect(service.output()).toMatch(/PostgreSQL unreachable; serving the clients and keys last read/)
    expect(service.output()).toMatch(/PostgreSQL is back/)
    expect(service.child.exitCode).toBeNull()
  }, 90_000)

  it("the readiness check fails while PostgreSQL is away and passes again once it is back", async () => {
    const scope = await Effect.runPromise(Scope.make())
    try {
      const layer = Layer.merge(OAuthDatabase.layer, Readiness.layer).pipe(
        Layer.provide(Readiness.layer),
        Layer.provide(AppConfig.layer),
        Layer.provide(configFrom({ DATABASE_URL: pg.url }))
      )
      const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
      const status = () => Effect.runPromise(Effect.flatMap(Readiness, (r) => r.status).pipe(Effect.provide(context)))
      expect(await status()).toEqual({ ready: true })
      await pg.stop()
      expect(await status()).toMatchObject({ ready: false, reasons: [expect.stringMatching(/^postgresql: /)] })
      await pg.start()
      let ready = await status()
      for (let i = 0; i < 40 && !ready.ready; i++) {
        await sleep(250)
        ready = await status()
      }
      expect(ready).toEqual({ ready: true })
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 60_000)
})
