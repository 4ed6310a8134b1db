/**
 * Several instances behind one Redis (CONTRACT C2, C8): one shared rate limit; and a Redis outage
 * under traffic, where every request still gets a defined answer and sharing resumes afterwards.
 */
import type { ChildProcess } from "node:child_process"
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { startRedis as startRedisServer } from "../../support/redis.ts"
import { freePort, type ServiceProcess, spawnService, startExpectingFailure } from "../../support/spawn.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const running: Array<ServiceProcess> = []
const redises: Array<ChildProcess> = []
let emulator: CoinGeckoEmulator
beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1" })
})
afterAll(async () => {
  await emulator.close()
  await Promise.all(running.map((s) => s.stop("SIGKILL")))
  for (const r of redises) r.kill("SIGKILL")
})

const startRedis = async (port: number) => {
  const child = await startRedisServer(port)
  redises.push(child)
  return child
}

const rates = (service: ServiceProcess, body: unknown) =>
  fetch(`${service.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000)
  })

const health = (service: ServiceProcess) =>
  fetch(`${service.url}/api/health`).then((r) => r.status, () => "no answer" as const)

/** A limited operation (health is not, C3): an empty sign-up is counted, then refused 400. */
const counted = (service: ServiceProcess) =>
  fetch(`${service.url}/api/subscribe`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
    .then((r) => r.status, () => "no answer" as const)

describe("instances sharing Redis", () => {
  it("share one rate limit", async () => {
    const env = { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: `test-${randomUUID()}:`, RATE_LIMIT_SUBSCRIBE_PER_MIN: "6" }
    const [a, b] = await Promise.all([spawnService(env), spawnService(env)])
    running.push(a!, b!)
    const statuses: Array<number | string> = []
    for (let i = 0; i < 4; i++) {
      statuses.push(await counted(a!))
      statuses.push(await counted(b!))
    }
    expect(statuses.filter((s) => s === 400)).toHaveLength(6)
    expect(statuses.slice(6)).toEqual([429, 429])
  })

  it("share one rates cache: what one instance fetched, the other serves without an upstream call", async () => {
    const env = {
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: `test-${randomUUID()}:`,
      COINGECKO_BASE_URL: emulator.url,
      RATE_LIMIT_RATES_PER_MIN: "100000"
    }
    const [a, b] = await Promise.all([spawnService(env), spawnService(env)])
    running.push(a!, b!)
    const body = { cryptos: ["BTC", "ETH", "SOL"], currency: "eur", days: 30 }
    const first = await rates(a!, body)
    expect(first.status).toBe(200)
    const callsAfterFirst = emulator.stats().total
    expect(callsAfterFirst).toBeGreaterThan(0)
    const second = await rates(b!, body)
    expect(second.status).toBe(200)
    expect(emulator.stats().total).toBe(callsAfterFirst)
    expect((await second.json()).rates).toEqual((await first.json()).rates)
  })

  it("keep answering through a Redis outage and share again once it is back", async () => {
    const port = await freePort()
    let redis = await startRedis(port)
    const env = {
      REDIS_URL: `redis://127.0.0.1:${port}`,
      RATE_LIMIT_RATES_PER_MIN: "100000",
      COINGECKO_BASE_URL: emulator.url
    }
    const service = await spawnService(env)
    running.push(service)

    const results: Array<number | string> = []
    let stop = false
    const body = { cryptos: ["ADA", "BTC"], days: 7 }
    // Warm first: a fresh instance answered 503 to this query for its first seconds on a busy machine (start-up loads).
    await expect.poll(() => rates(service, body).then((r) => r.status, () => "no answer"), { timeout: 20_000, interval: 100 }).toBe(200)
    const traffic = (async () => {
      while (!stop) {
        results.push(await health(service))
        results.push(await rates(service, body).then((r) => r.status, () => "no answer"))
      }
    })()
    await new Promise((r) => setTimeout(r, 300))
    redis.kill("SIGKILL")
    await new Promise((r) => setTimeout(r, 1_000))
    const duringOutage = results.length
    redis = await startRedis(port)
    await new Promise((r) => setTimeout(r, 3_000))
    stop = true
    await traffic

    expect(results.length).toBeGreaterThan(duringOutage)
    expect(results.filter((s) => s !== 200), `every answer 200 (health, rates, health, …): ${JSON.stringify(results)}`).toEqual([])
    expect(service.output()).toMatch(/shared store failed, counting in memory/)
    expect(service.output()).toMatch(/shared store is back/)
    expect(service.child.exitCode).toBeNull()
  }, 30_000)
})

describe("cluster mode", () => {
  it("runs WEB_CONCURRENCY workers on one port, with one shared limit, and drains on SIGTERM", async () => {
    const service = await spawnService({
      WEB_CONCURRENCY: "2",
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: `test-${randomUUID()}:`,
      // Under 10 per minute every count is exact in Redis (src/http/sharedCounter.ts; larger limits: test/integration/scale).
      RATE_LIMIT_SUBSCRIBE_PER_MIN: "9"
    })
    running.push(service)
    const statuses = await Promise.all(Array.from({ length: 14 }, () => counted(service)))
    expect(statuses.filter((s) => s === 400)).toHaveLength(9)
    expect(statuses.filter((s) => s === 429)).toHaveLength(5)
    expect(await service.stop("SIGTERM")).toBe(0)
  })

  it("refuses several workers without Redis", async () => {
    const { code, output } = await startExpectingFailure({ WEB_CONCURRENCY: "2" })
    expect(code).toBe(1)
    expect(output).toMatch(/WEB_CONCURRENCY: more than one worker needs REDIS_URL/)
  })
})
