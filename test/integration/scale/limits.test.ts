/**
 * A request limit counted across two real instances sharing Redis (issue 16, C8): admissions stay
 * within the stated bound, limit + N × floor(limit / 10), and both instances refuse once the others'
 * counts have reached them (src/http/sharedCounter.ts).
 */
import { randomUUID } from "node:crypto"
import { afterAll, describe, expect, it } from "vitest"
import { type ServiceProcess, spawnService } from "../../support/spawn.ts"
import { sleep } from "../../support/privateServers.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const running: Array<ServiceProcess> = []
afterAll(() => Promise.all(running.map((s) => s.stop("SIGKILL"))))

/** A limited operation: an empty sign-up is counted, then refused 400 (429 once the limit is spent). */
const subscribe = (service: ServiceProcess) =>
  fetch(`${service.url}/api/subscribe`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
    .then((r) => r.status, () => "no answer" as const)

describe("a limit shared by two instances through Redis", () => {
  it("admits at most limit + 2 × floor(limit / 10) across both, then both refuse", async () => {
    // Counts are per minute: a run straddling a minute would count in two windows.
    if (Date.now() % 60_000 > 45_000) await sleep(60_000 - (Date.now() % 60_000) + 100)
    const limit = 100
    const env = { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: `test-${randomUUID()}:`, RATE_LIMIT_SUBSCRIBE_PER_MIN: String(limit) }
    const [a, b] = (await Promise.all([spawnService(env), spawnService(env)])) as [ServiceProcess, ServiceProcess]
    running.push(a, b)
    // Both instances at once, 16 requests in flight on each, until each has sent 150.
    const statuses: Array<number | string> = []
    await Promise.all([a, b].flatMap((service) =>
      Array.from({ length: 16 }, async (_, lane) => {
        for (let i = lane; i < 150; i += 16) statuses.push(await subscribe(service))
      })
    ))
    const admitted = statuses.filter((s) => s === 400).length
    expect(statuses.filter((s) => s !== 400 && s !== 429)).toEqual([])
    expect(admitted).toBeGreaterThanOrEqual(limit)
    expect(admitted).toBeLessThanOrEqual(limit + 2 * Math.floor(limit / 10))
    await sleep(300)
    expect([await subscribe(a), await subscribe(b)]).toEqual([429, 429])
  }, 60_000)
})
