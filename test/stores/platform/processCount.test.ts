/**
 * platform/processCount: the processes sharing a Redis count each other (each marks itself present), a process that
 * stops is no longer counted, and while Redis is down the count last seen stands; sharedRateLimiter.ts `processShare`
 * turns it into each process's part of a limit, one call in a longer window when the limit is smaller than the count.
 */
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Layer, Scope } from "effect"
import { ProcessCount } from "../../../src/platform/processCount/ProcessCount.ts"
import * as ProcessCountRedis from "../../../src/platform/processCount/redis.ts"
import { processShare } from "../../../src/platform/sharedRateLimiter.ts"
import { refusingWhile } from "../../support/redis.ts"

/** One process of a deployment under `prefix`, marking itself every 100 ms; its scope stops it. */
const process = (prefix: string, outage: { on: boolean }, workers = 1) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(ProcessCountRedis.layerRedis({ prefix, workers, markMs: 100 }).pipe(Layer.provide(refusingWhile(outage))), scope)
    return { count: Context.get(context, ProcessCount).current, stop: Scope.close(scope, Exit.void) }
  })

describe("the processes sharing a Redis", () => {
  it.live("count each other within a mark, no longer one that stopped, and keep the count last seen while Redis is down", () =>
    Effect.gen(function*() {
      const prefix = `test-processes-${randomUUID()}:`
      const outage = { on: false }
      const [a, b, c] = yield* Effect.all([process(prefix, outage), process(prefix, outage), process(prefix, outage)])
      yield* Effect.sleep("400 millis")
      assert.deepStrictEqual([a.count(), b.count(), c.count()], [3, 3, 3])
      yield* c.stop
      yield* Effect.sleep("400 millis")
      assert.deepStrictEqual([a.count(), b.count()], [2, 2], "a process that stopped took its mark back")
      outage.on = true
      yield* Effect.sleep("400 millis")
      assert.deepStrictEqual([a.count(), b.count()], [2, 2], "the count last seen stands while Redis is down")
      yield* Effect.all([a.stop, b.stop])
    }))

  it.live("never fewer than this host's workers, also before Redis has answered", () =>
    Effect.gen(function*() {
      const down = yield* process(`test-processes-${randomUUID()}:`, { on: true }, 4)
      yield* Effect.sleep("300 millis")
      assert.strictEqual(down.count(), 4)
      yield* down.stop
    }))
})

describe("one process's share of a limit (processShare)", () => {
  const minute = { key: "k", limit: 600, window: "1 minute" } as const
  const second = { key: "k", limit: 10, window: "1 second" } as const
  const windowMs = (consume: { readonly window: Duration.Input }) => Duration.toMillis(Duration.fromInputUnsafe(consume.window))

  it("the limit over the processes, in whole calls", () => {
    assert.strictEqual(processShare(minute, 4).limit, 150)
    assert.strictEqual(processShare(second, 4).limit, 2)
    assert.strictEqual(processShare(second, 1).limit, 10)
  })

  it("under one call a window: one call in a window as many times longer, never more than the limit together", () => {
    const each = processShare(second, 12)
    assert.deepStrictEqual([each.limit, windowMs(each)], [1, 1_200])
    // Twelve processes, each one call every 1.2 s: 10 a second together.
    assert.isAtMost(12 * each.limit * (1_000 / windowMs(each)), 10)
    const many = processShare(minute, 1_000)
    assert.deepStrictEqual([many.limit, windowMs(many)], [1, 100_000])
  })
})
