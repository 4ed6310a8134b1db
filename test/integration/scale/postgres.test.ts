/**
 * Instances sharing nothing on disk (issue 16, C2 DATABASE_URL, C6): two real processes, each with its
 * own DATA_DIR, one PostgreSQL database. A client created once with the CLI gets tokens that both
 * accept; a revocation, a secret rotation or a key rotation made by the CLI or an instance reaches
 * the other instance within a second; instances starting together migrate once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { freePort, type ServiceProcess, spawnService, startExpectingFailure } from "../../support/spawn.ts"
import { clientsCli, freshDatabase, requestToken, runSql, within } from "../../support/privateServers.ts"

let emulator: CoinGeckoEmulator
let database: Awaited<ReturnType<typeof freshDatabase>>
let env: Record<string, string>
let a: ServiceProcess
let b: ServiceProcess
const cli = (...args: Array<string>) => clientsCli(args, { DATABASE_URL: database.url })

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1" })
  database = await freshDatabase()
  env = {
    DATABASE_URL: database.url,
    // One service behind a load balancer: one issuer for every instance.
    PUBLIC_BASE_URL: "https://api.example.test",
    COINGECKO_BASE_URL: emulator.url,
    RATE_LIMIT_RATES_PER_MIN: "100000"
  }
  // Started together on an empty database: both apply (or find applied) the migrations.
  ;[a, b] = await Promise.all([spawnService(env), spawnService(env)]) as [ServiceProcess, ServiceProcess]
}, 60_000)
afterAll(async () => {
  await Promise.all([a?.stop("SIGKILL"), b?.stop("SIGKILL")])
  await emulator?.close()
  await database?.drop()
})

/** The status a token gets on a scoped operation (200 accepted, 401 refused). */
const ratesWith = (service: ServiceProcess, token: string) =>
  fetch(`${service.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ cryptos: ["BTC"], days: 7 })
  }).then((r) => r.status)

describe("two instances on one PostgreSQL, each with its own DATA_DIR", () => {
  it("migrate once when started together, and share one signing key", async () => {
    const [migrations] = await runSql(database.url, ["SELECT migration_id FROM crypto_api_migrations ORDER BY migration_id"])
    // Each once: the OAuth tables, the rates history, the durable cells, the clients' methods (src/database/migrations.ts).
    expect(migrations).toEqual([{ migration_id: 1 }, { migration_id: 2 }, { migration_id: 3 }, { migration_id: 4 }])
    const [ja, jb] = await Promise.all([a, b].map((s) => fetch(`${s.url}/.well-known/jwks.json`).then((r) => r.json())))
    expect(ja).toEqual(jb)
    expect(ja.keys).toHaveLength(1)
  })

  it("a client created once with the CLI gets tokens that both instances accept", async () => {
    const created = await cli("create", "--name", "shared", "--scope", "rates:read")
    for (const [issuer, verifier] of [[a, b], [b, a]] as const) {
      const { status, token } = await requestToken(issuer, created.client_id, created.client_secret)
      expect(status).toBe(200)
      expect(await ratesWith(verifier, token!)).toBe(200)
    }
  })

  it("revoked with the CLI: the other instances refuse its tokens and its secret within a second", async () => {
    const created = await cli("create", "--name", "to revoke", "--scope", "rates:read")
    const { token } = await requestToken(a, created.client_id, created.client_secret)
    expect(await ratesWith(b, token!)).toBe(200)
    await cli("revoke", created.client_id)
    const took = await within(1_000, async () => (await ratesWith(b, token!)) === 401)
    expect(took).toBeLessThan(1_000)
    expect((await requestToken(a, created.client_id, created.client_secret)).status).toBe(401)
  })

  it("a secret rotated with the CLI: the old one is refused and the new one accepted everywhere within a second", async () => {
    const created = await cli("create", "--name", "to rotate", "--scope", "rates:read")
    expect((await requestToken(b, created.client_id, created.client_secret)).status).toBe(200)
    const rotated = await cli("rotate", created.client_id)
    await within(1_000, async () => (await requestToken(b, created.client_id, created.client_secret)).status === 401)
    await within(1_000, async () => (await requestToken(a, created.client_id, rotated.client_secret)).status === 200)
  })

  it("a key rotated with the CLI: both instances sign with the new key within a second; older tokens still verify", async () => {
    const created = await cli("create", "--name", "keys", "--scope", "rates:read")
    const before = (await requestToken(a, created.client_id, created.client_secret)).token!
    const rotation = await cli("rotate-key")
    const kidOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[0]!, "base64url").toString()).kid
    for (const service of [a, b]) {
      await within(1_000, async () => kidOf((await requestToken(service, created.client_id, created.client_secret)).token!) === rotation.kid)
    }
    const after = (await requestToken(b, created.client_id, created.client_secret)).token!
    expect(await ratesWith(a, after)).toBe(200)
    expect(await ratesWith(b, before)).toBe(200)
  })

  it("the CLI lists what the instances share, without secrets", async () => {
    const listed = await cli("list") as Array<Record<string, unknown>>
    expect(listed.map((c) => c.name)).toEqual(expect.arrayContaining(["shared", "to revoke", "to rotate", "keys"]))
    expect(listed.find((c) => c.name === "to revoke")!.status).toBe("revoked")
    // The method's RFC 7591 name is the one place the word may appear.
    expect(JSON.stringify(listed).replaceAll('"client_secret_basic"', "")).not.toMatch(/secret|hash/)
  })
})

describe("PostgreSQL at start-up", () => {
  it("an unreachable DATABASE_URL stops the start with a line naming it, no stack trace", async () => {
    const port = await freePort()
    const { code, output } = await startExpectingFailure({ DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/none` }, 30_000)
    expect(code).toBe(1)
    // The reason is the driver's: ECONNREFUSED on a quiet machine, another once under heavy load; the line is what counts.
    expect(output).toMatch(/DATABASE_URL: cannot prepare the PostgreSQL tables \([^)\n]+\); check that PostgreSQL runs/)
    expect(output).not.toMatch(/\n\s+at /)
  }, 40_000)
})
