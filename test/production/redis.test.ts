/**
 * Several instances behind one Redis (CONTRACT C2, C8): one shared rate limit; and a Redis outage
 * under traffic, where every request still gets a defined answer and sharing resumes afterwards.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, type ServiceProcess, spawnService } from "../support/spawn.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const running: Array<ServiceProcess> = []
const redises: Array<ChildProcess> = []
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop("SIGKILL")))
  for (const r of redises) r.kill("SIGKILL")
})

const startRedis = async (port: number) => {
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  redises.push(child)
  await new Promise<void>((resolve, reject) => {
    let out = ""
    const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${out}`)), 10_000)
    child.stdout!.on("data", (c) => {
      out += c
      if (out.includes("Ready to accept connections")) {
        clearTimeout(timer)
        resolve()
      }
    })
  })
  return child
}

const health = (service: ServiceProcess) =>
  fetch(`${service.url}/api/health`).then((r) => r.status, () => "no answer" as const)

describe("instances sharing Redis", () => {
  it("share one rate limit", async () => {
    const env = { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: `test-${randomUUID()}:`, RATE_LIMIT_HEALTH_PER_MIN: "6" }
    const [a, b] = await Promise.all([spawnService(env), spawnService(env)])
    running.push(a!, b!)
    const statuses: Array<number | string> = []
    for (let i = 0; i < 4; i++) {
      statuses.push(await health(a!))
      statuses.push(await health(b!))
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(6)
    expect(statuses.slice(6)).toEqual([429, 429])
  })

  it("keep answering through a Redis outage and share again once it is back", async () => {
    const port = await freePort()
    let redis = await startRedis(port)
    const env = { REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_HEALTH_PER_MIN: "100000" }
    const service = await spawnService(env)
    running.push(service)

    const results: Array<number | string> = []
    let stop = false
    const traffic = (async () => {
      while (!stop) results.push(await health(service))
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
    expect(results.every((s) => s === 200)).toBe(true)
    expect(service.output()).toMatch(/shared store failed, counting in memory/)
    expect(service.output()).toMatch(/shared store is back/)
    expect(service.child.exitCode).toBeNull()
  }, 30_000)
})
