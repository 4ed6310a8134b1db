/**
 * Request limits shared through Redis at in-memory cost (issue 16, C8): decisions in memory, batches
 * to Redis, and the stated bound — N instances exceed a limit by at most N × floor(limit / 10), one
 * instance never, limits under 10 exact. Real Redis (REDIS_URL), one counter per "instance".
 */
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { afterAll, describe, expect, it } from "vitest"
import { randomUUID } from "node:crypto"
import { Effect, Exit, Layer, Scope } from "effect"
import { Redis } from "effect/persistence"
import { type Count, makeSharedCounts, type SharedCounts, slackOf } from "../../../src/http/sharedCounter.ts"
import { startRedis } from "../../support/privateServers.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const scopes: Array<Scope.Closeable> = []
afterAll(async () => {
  for (const scope of scopes) await Effect.runPromise(Scope.close(scope, Exit.void))
})

/** A Redis client and its number of script calls (round trips of the counter). */
const connect = async (url = redisUrl) => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const context = await Effect.runPromise(Layer.buildWithScope(NodeRedis.layer({ url, disableOfflineQueue: true }), scope))
  const redis = context.mapUnsafe.get(Redis.Redis.key) as Redis.Redis["Service"]
  let calls = 0
  const counted: Redis.Redis["Service"] = {
    ...redis,
    eval: (script) => (...params) => Effect.suspend(() => {
      calls++
      return redis.eval(script)(...params)
    })
  }
  return { redis: counted, calls: () => calls, scope }
}

/**
 * One instance's counts. The bound is stated for a Redis that answers: an answer later than the timeout is an outage
 * (counted in memory, the last test), so a busy test machine gets a generous one rather than a chance failure.
 */
const instance = async (prefix: string, url = redisUrl) => {
  const { redis, calls, scope } = await connect(url)
  const counts = await Effect.runPromise(
    makeSharedCounts({ redis, prefix, windowMillis: 60_000, timeoutMillis: 5_000 }).pipe(Scope.provide(scope))
  )
  return { counts, calls }
}

/** Counts one request; an Effect (Redis decides) is run. */
const take = async (counts: SharedCounts, key: string, limit: number): Promise<Count & { readonly local: boolean }> => {
  const counted = counts.count(key, limit)
  return Effect.isEffect(counted) ? { ...(await Effect.runPromise(counted)), local: false } : { ...counted, local: true }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// Keys are per minute: a test that straddles a minute would count in two windows.
const awayFromMinuteEdge = async () => {
  const intoMinute = Date.now() % 60_000
  if (intoMinute > 50_000) await sleep(60_000 - intoMinute + 100)
}

describe("shared request counts", () => {
  it("decide in memory: no Redis round trip per request in the common case", async () => {
    const { counts, calls } = await instance(`test-${randomUUID()}:`)
    const results = []
    for (let i = 0; i < 5_000; i++) results.push(await take(counts, "rates:ip:192.0.2.1", 1_000_000))
    expect(results.every((r) => r.allowed && r.local)).toBe(true)
    // Only the batches of the background sync (every 100 ms) talk to Redis.
    expect(calls()).toBeLessThan(20)
  })

  it("one instance never exceeds a limit", async () => {
    await awayFromMinuteEdge()
    const { counts } = await instance(`test-${randomUUID()}:`)
    const results = await Promise.all(Array.from({ length: 300 }, () => take(counts, "rates:ip:192.0.2.2", 200)))
    expect(results.filter((r) => r.allowed)).toHaveLength(200)
  })

  it("two instances exceed a limit by at most 2 × floor(limit / 10), and then both refuse", async () => {
    await awayFromMinuteEdge()
    const prefix = `test-${randomUUID()}:`
    const [a, b] = [await instance(prefix), await instance(prefix)]
    const limit = 200
    const key = "rates:client:c1"
    let allowed = 0
    // Both instances at full speed, interleaved, each as fast as it can.
    await Promise.all([a, b].map(async ({ counts }) => {
      for (let i = 0; i < 400; i++) {
        if ((await take(counts, key, limit)).allowed) allowed++
        if (i % 25 === 0) await sleep(5)
      }
    }))
    expect(allowed).toBeGreaterThanOrEqual(limit)
    expect(allowed).toBeLessThanOrEqual(limit + 2 * slackOf(limit))
    await sleep(300)
    expect((await take(a.counts, key, limit)).allowed).toBe(false)
    expect((await take(b.counts, key, limit)).allowed).toBe(false)
  })

  it("count limits under 10 exactly in Redis", async () => {
    await awayFromMinuteEdge()
    const prefix = `test-${randomUUID()}:`
    const [a, b] = [await instance(prefix), await instance(prefix)]
    const statuses = []
    for (let i = 0; i < 6; i++) {
      statuses.push((await take(a.counts, "subscribe:ip:192.0.2.3", 6)).allowed)
      statuses.push((await take(b.counts, "subscribe:ip:192.0.2.3", 6)).allowed)
    }
    expect(statuses.filter(Boolean)).toHaveLength(6)
    expect(statuses.slice(6).some(Boolean)).toBe(false)
  })

  it("count in memory while Redis is away, and hand the counts over when it is back", async () => {
    await awayFromMinuteEdge()
    const redis = await startRedis()
    try {
      const prefix = `test-${randomUUID()}:`
      const { counts } = await instance(prefix, redis.url)
      for (let i = 0; i < 5; i++) expect((await take(counts, "rates:ip:192.0.2.4", 1_000)).allowed).toBe(true)
      await sleep(300)
      await redis.stop()
      for (let i = 0; i < 7; i++) expect((await take(counts, "rates:ip:192.0.2.4", 1_000)).allowed).toBe(true)
      // The same port, an empty Redis: the unsynced 7 arrive once the client has reconnected.
      await redis.start()
      const window = Math.floor(Date.now() / 60_000)
      const reader = await connect(redis.url)
      let stored = 0
      for (let i = 0; i < 60 && stored !== 7; i++) {
        await sleep(100)
        stored = Number(await Effect.runPromise(reader.redis.send<string | null>("GET", `${prefix}rates:ip:192.0.2.4:${window}`)))
      }
      expect(stored).toBe(7)
    } finally {
      // Its own server: left running, it outlived the run (one redis-server per npm test).
      await redis.stop()
    }
  }, 30_000)
})
