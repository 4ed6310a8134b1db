/**
 * One holder of a role among instances (src/platform/leadership/): through the machine's Redis, of two
 * instances running the same role one leads and the other follows; the follower leads once the leader
 * stops (it gives the lease back), or once its lease runs out when it went without a word; messages
 * published on a channel reach every listener. While Redis is away, an instance leads (as without Redis).
 * Alone (no Redis), it always leads.
 */
import { NodeRedis } from "@effect/platform-node"
import { randomUUID } from "node:crypto"
import { Context, Effect, Exit, Layer, Queue, Scope } from "effect"
import { Redis } from "effect/persistence"
import { afterEach, describe, expect, it } from "vitest"
import { Leadership } from "../../../src/platform/leadership/Leadership.ts"
import * as LeadershipRedis from "../../../src/platform/leadership/redis.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const scopes: Array<Scope.Closeable> = []
afterEach(async () => {
  for (const scope of scopes.splice(0)) await Effect.runPromise(Scope.close(scope, Exit.void))
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** An instance running the role: which role it plays now, and its Leadership. */
const instance = async (layer: Layer.Layer<Leadership, unknown>, name = "role") => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const leadership = Context.get(await Effect.runPromise(Layer.buildWithScope(layer, scope)), Leadership)
  const state = { role: "none" as "none" | "lead" | "follow" }
  const play = (role: "lead" | "follow") => Effect.andThen(Effect.sync(() => (state.role = role)), Effect.never)
  await Effect.runPromise(leadership.run(name, { lead: play("lead"), follow: play("follow") }).pipe(Scope.provide(scope)))
  return { state, leadership, scope }
}

/**
 * Shorter than production's (20 s, 5 s), but a check period long enough for a busy machine: a Redis answer slower than
 * one check counts as Redis away (the instance leads alone), so a check of 100 ms made two leaders when the machine
 * held a call up that long.
 */
const LEASE_MS = 4_000
const CHECK_MS = 1_000
const onRedis = (prefix: string) => LeadershipRedis.layerRedis({ prefix, leaseMs: LEASE_MS, checkMs: CHECK_MS }).pipe(Layer.provide(NodeRedis.layer({ url: redisUrl })))

const until = async (test: () => boolean, ms: number) => {
  const end = Date.now() + ms
  while (!test()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms`)
    await sleep(20)
  }
}

describe("Leadership through Redis", () => {
  it("of two instances one leads, the other follows; the follower leads at once when the leader stops", async () => {
    const prefix = `test-lead-${randomUUID()}:`
    const a = await instance(onRedis(prefix))
    await until(() => a.state.role === "lead", 5_000)
    const b = await instance(onRedis(prefix))
    await until(() => b.state.role === "follow", 5_000)
    // Two more checks each: the roles hold.
    await sleep(2 * CHECK_MS)
    expect([a.state.role, b.state.role]).toEqual(["lead", "follow"])
    await Effect.runPromise(Scope.close(a.scope, Exit.void))
    // Given back: the next check takes it, not the lease's end.
    await until(() => b.state.role === "lead", 2 * CHECK_MS)
  })

  it("a leader that went without a word (its lease not given back) is replaced once the lease runs out", async () => {
    const prefix = `test-lead-${randomUUID()}:`
    const redis = NodeRedis.layer({ url: redisUrl })
    // A lease held by an instance that is gone: nobody renews it.
    await Effect.runPromise(Effect.flatMap(Redis.Redis, (r) => r.send("SET", `${prefix}lease:role`, "gone", "PX", String(LEASE_MS))).pipe(Effect.provide(redis), Effect.scoped))
    const b = await instance(onRedis(prefix))
    await until(() => b.state.role === "follow", LEASE_MS)
    await until(() => b.state.role === "lead", LEASE_MS + 2 * CHECK_MS)
  })

  it("what is published on a channel reaches every listener", async () => {
    const prefix = `test-lead-${randomUUID()}:`
    const a = await instance(onRedis(prefix))
    const b = await instance(onRedis(prefix))
    const heard = await Effect.runPromise(Effect.gen(function*() {
      const inbox = yield* b.leadership.listen("news")
      yield* Effect.sleep("100 millis")
      yield* a.leadership.publish("news", "hello")
      return yield* Queue.take(inbox)
    }).pipe(Effect.scoped))
    expect(heard).toBe("hello")
  })

  it("while Redis is away, an instance leads", async () => {
    const away = Layer.succeed(Redis.Redis)({
      send: () => Effect.fail(new Redis.RedisError({ cause: new Error("ECONNREFUSED") })),
      eval: () => () => Effect.fail(new Redis.RedisError({ cause: new Error("ECONNREFUSED") })),
      reserve: Effect.fail(new Redis.RedisError({ cause: new Error("ECONNREFUSED") })),
      subscribe: () => Effect.tap(Queue.unbounded<Redis.RedisMessage, Redis.RedisError>(), (q) => Queue.fail(q, new Redis.RedisError({ cause: new Error("ECONNREFUSED") })))
    } as unknown as Redis.Redis["Service"])
    const a = await instance(LeadershipRedis.layerRedis({ prefix: "away:", leaseMs: 1_000, checkMs: 100 }).pipe(Layer.provide(away)))
    await until(() => a.state.role === "lead", 1_000)
  })
})

describe("Leadership alone (no Redis)", () => {
  it("always leads", async () => {
    const a = await instance(Leadership.layerAlone)
    const b = await instance(Leadership.layerAlone)
    await until(() => a.state.role === "lead" && b.state.role === "lead", 1_000)
  })
})
