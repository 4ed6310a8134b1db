/**
 * The in-process rate-limit store: fixed windows as the RateLimiter expects them, and no counter kept
 * past its window, whatever the number of callers (one key per IP on a public API).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit } from "effect"
import { RateLimiter } from "effect/persistence"
import { TestClock } from "effect/testing"
import { makeMemoryCounterStore } from "../../../src/http/rateLimit.ts"

const consume = (limiter: RateLimiter.RateLimiter, key: string) =>
  Effect.exit(limiter.consume({ key, limit: 3, window: Duration.minutes(1), algorithm: "fixed-window" }))

describe("memory counter store", () => {
  it.effect("limits each key per window and starts again once the window is over", () =>
    Effect.gen(function*() {
      const { store } = yield* makeMemoryCounterStore
      const limiter = yield* RateLimiter.make.pipe(Effect.provideService(RateLimiter.RateLimiterStore, store))
      const remaining = []
      for (let i = 0; i < 3; i++) {
        const exit = yield* consume(limiter, "health:ip:a")
        assert.isTrue(Exit.isSuccess(exit))
        if (Exit.isSuccess(exit)) remaining.push(exit.value.remaining)
      }
      assert.deepStrictEqual(remaining, [2, 1, 0])
      assert.isTrue(Exit.isFailure(yield* consume(limiter, "health:ip:a")))
      assert.isTrue(Exit.isSuccess(yield* consume(limiter, "health:ip:b")), "another key has its own count")
      yield* TestClock.adjust("61 seconds")
      assert.isTrue(Exit.isSuccess(yield* consume(limiter, "health:ip:a")))
    }))

  it.effect("forgets the counters of callers whose window is over", () =>
    Effect.gen(function*() {
      const { store, size } = yield* makeMemoryCounterStore
      const limiter = yield* RateLimiter.make.pipe(Effect.provideService(RateLimiter.RateLimiterStore, store))
      for (let i = 0; i < 10_000; i++) yield* consume(limiter, `health:ip:10.0.${i >> 8}.${i & 255}`)
      assert.strictEqual(size(), 10_000)
      yield* TestClock.adjust("2 minutes")
      yield* consume(limiter, "health:ip:192.0.2.1")
      assert.strictEqual(size(), 1)
    }))
})
