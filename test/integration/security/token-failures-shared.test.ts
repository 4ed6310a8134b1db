/**
 * Issue 14, finding 4, with real processes: the token endpoint's failure limits were per process even
 * with REDIS_URL, so two instances allowed twice the limit. C2/C6: shared through Redis when configured,
 * counted in memory while Redis is away.
 */
import type { ChildProcess } from "node:child_process"
import { randomUUID } from "node:crypto"
import { afterAll, describe, expect, it } from "vitest"
import { startRedisOnFreePort } from "../../support/redis.ts"
import { type ServiceProcess, spawnService } from "../../support/spawn.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const LIMIT = 4
const running: Array<ServiceProcess> = []
const redises: Array<ChildProcess> = []
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop("SIGKILL")))
  for (const r of redises) r.kill("SIGKILL")
})

const wrongSecret = (service: ServiceProcess) =>
  fetch(`${service.url}/oauth/token`, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from("some-client:wrong").toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded"
    },
    body: "grant_type=client_credentials",
    signal: AbortSignal.timeout(10_000)
  }).then(async (res) => {
    await res.body?.cancel()
    return res.status
  })

const startRedis = async () => {
  const started = await startRedisOnFreePort()
  redises.push(started.child)
  return started
}

describe("failed token requests across instances", () => {
  it("two instances sharing Redis allow the limit once, not once each", async () => {
    const env = { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: `test-${randomUUID()}:`, OAUTH_MAX_FAILURES_PER_MIN: String(LIMIT) }
    const [a, b] = await Promise.all([spawnService(env), spawnService(env)])
    running.push(a!, b!)
    const statuses: Array<number> = []
    for (let i = 0; i < LIMIT; i++) {
      statuses.push(await wrongSecret(a!))
      statuses.push(await wrongSecret(b!))
    }
    // Before the fix: eight 401s, each process counting its own four.
    expect(statuses).toEqual([...Array(LIMIT).fill(401), ...Array(LIMIT).fill(429)])
  })

  it("count in memory while Redis is away", async () => {
    const { child: redis, port } = await startRedis()
    const service = await spawnService({ REDIS_URL: `redis://127.0.0.1:${port}`, OAUTH_MAX_FAILURES_PER_MIN: String(LIMIT) })
    running.push(service)
    redis.kill("SIGKILL")
    await new Promise((resolve) => redis.once("exit", resolve))
    const statuses: Array<number> = []
    for (let i = 0; i <= LIMIT; i++) statuses.push(await wrongSecret(service))
    expect(statuses).toEqual([...Array(LIMIT).fill(401), 429])
    expect(service.output()).toMatch(/failure limits: shared store failed, counting in memory/)
  }, 30_000)
})
