/**
 * Lists held apart (copies/Copies.ts `makeHeldList`, as the coin index, the currency list and Coinbase's product list
 * are): loaded at start, failures remembered with a doubling wait, the last good copy served, reloaded
 * when due while the held copy answers, a copy shared through the store adopted instead of fetched, a
 * reader with nothing held waiting for the load running, until its deadline only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Option, Schema } from "effect"
import { TestClock } from "effect/testing"
import { CopyStore, type CopyStoreShape } from "../../../../src/rates/copies/CopyStore.ts"
import { makeHeldList } from "../../../../src/rates/copies/Copies.ts"
import { type SourceError, sourceError, spendingUntil } from "../../../../src/rates/upstream.ts"

/** A source's list whose answers the test scripts: a value, or "fail". */
const scripted = (answers: Array<ReadonlyArray<string> | "fail">) => {
  const state = { calls: 0 }
  const fetch = Effect.suspend(() => {
    const answer = answers[Math.min(state.calls++, answers.length - 1)]!
    return answer === "fail"
      ? Effect.fail(sourceError("coingecko", "Transient", "test: down"))
      : Effect.succeed(answer)
  })
  return { state, fetch }
}

/** A store standing for Redis: `shared`, one map for every instance built on it, with leases; a write may take `writeMs`. */
const sharedStore = (options: { readonly writeMs?: number } = {}) => {
  const entries = new Map<string, string>()
  const leases = new Set<string>()
  const write = (key: string, value: Schema.Json) => Effect.sync(() => void entries.set(key, JSON.stringify(value)))
  const shape: CopyStoreShape = {
    get: (key) => Effect.sync(() => Option.map(Option.fromUndefinedOr(entries.get(key)), (json) => JSON.parse(json) as Schema.Json)),
    set: (key, value) => options.writeMs === undefined ? write(key, value) : Effect.andThen(Effect.sleep(options.writeMs), write(key, value)),
    claim: (key) => Effect.sync(() => leases.has(key) ? "held" : (leases.add(key), "taken")),
    release: (key) => Effect.sync(() => void leases.delete(key)),
    shared: true
  }
  return Layer.succeed(CopyStore)(shape)
}

const KEY = "rates:v2:test"

/** A daily list, held as the directory holds its lists; `get` is a request's read of it. */
const listOf = (fetch: Effect.Effect<ReadonlyArray<string>, SourceError>) =>
  Effect.gen(function*() {
    const held = yield* makeHeldList<ReadonlyArray<string>>({
      name: "test list",
      source: "coingecko",
      key: KEY,
      value: Schema.Array(Schema.String),
      load: fetch,
      reload: { everyMs: Duration.toMillis(Duration.hours(24)), lastGoodMs: Duration.toMillis(Duration.days(7)) },
      retry: { firstMs: 10_000 }
    })
    yield* Effect.forkScoped(held.reloads)
    yield* Effect.yieldNow
    return {
      get: (deadline: number) => Effect.match(held.get.pipe(spendingUntil(deadline)), { onFailure: () => undefined, onSuccess: (value) => value }),
      // What a reader finding none is told: `unavailable`, and when to ask again.
      retryAfterSeconds: Effect.map(Effect.flip(held.get.pipe(spendingUntil(0))), (error) => error.retryAfterSeconds)
    }
  })

const far = Date.now() + 60_000

describe("lists held apart", () => {
  it.effect("a failure is remembered: nothing is asked again before the wait, which doubles", () => {
    const source = scripted(["fail", "fail", ["usd"]])
    return Effect.gen(function*() {
      const list = yield* listOf(source.fetch)
      assert.strictEqual(source.state.calls, 1, "loaded at start")
      for (let i = 0; i < 20; i++) assert.isUndefined(yield* list.get(far))
      assert.strictEqual(source.state.calls, 1)
      assert.strictEqual(yield* list.retryAfterSeconds, 10)
      yield* TestClock.adjust("10 seconds")
      assert.isUndefined(yield* list.get(far))
      assert.strictEqual(source.state.calls, 2)
      assert.strictEqual(yield* list.retryAfterSeconds, 20)
      yield* TestClock.adjust("19 seconds")
      assert.isUndefined(yield* list.get(far))
      assert.strictEqual(source.state.calls, 2)
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* list.get(far), ["usd"])
      assert.strictEqual(source.state.calls, 3)
    }).pipe(Effect.provide(CopyStore.layerMemory()), Effect.scoped)
  })

  it.effect("reloads once a day on its schedule, read or not, answering from the copy held meanwhile, and keeps it when the reload fails", () => {
    const source = scripted([["usd"], "fail", ["usd", "eur"]])
    return Effect.gen(function*() {
      const list = yield* listOf(source.fetch)
      assert.deepStrictEqual(yield* list.get(far), ["usd"])
      yield* TestClock.adjust("23 hours")
      assert.deepStrictEqual(yield* list.get(far), ["usd"])
      assert.strictEqual(source.state.calls, 1)
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(source.state.calls, 2, "its day over, reloaded without a read")
      assert.deepStrictEqual(yield* list.get(far), ["usd"], "the last good copy while the reload fails")
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(source.state.calls, 3, "again after the back-off's first wait")
      assert.deepStrictEqual(yield* list.get(far), ["usd", "eur"])
      yield* TestClock.adjust("23 hours")
      assert.strictEqual(source.state.calls, 3, "nothing asked before its next day")
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(source.state.calls, 4)
    }).pipe(Effect.provide(CopyStore.layerMemory()), Effect.scoped)
  })

  it.effect("an instance adopts the copy another stored instead of fetching its own", () => {
    const first = scripted([["usd", "eur"]])
    const second = scripted([["never"]])
    return Effect.gen(function*() {
      const one = yield* listOf(first.fetch)
      assert.deepStrictEqual(yield* one.get(far), ["usd", "eur"])
      const two = yield* listOf(second.fetch)
      assert.deepStrictEqual(yield* two.get(far), ["usd", "eur"])
      assert.strictEqual(second.state.calls, 0)
    }).pipe(Effect.provide(sharedStore()), Effect.scoped)
  })

  it.effect("an instance starting while another is still storing its load adopts that copy instead of loading again", () => {
    const first = scripted([["usd", "eur"]])
    const second = scripted([["never"]])
    return Effect.gen(function*() {
      yield* listOf(first.fetch) // loaded at once; storing it takes a second
      yield* TestClock.adjust("500 millis")
      const two = yield* listOf(second.fetch)
      yield* TestClock.adjust("2 seconds")
      assert.deepStrictEqual(yield* two.get(far), ["usd", "eur"])
      assert.strictEqual(second.state.calls, 0, "one load for the instances sharing the store (a small plan's credits hold one)")
    }).pipe(Effect.provide(sharedStore({ writeMs: 1_000 })), Effect.scoped)
  })

  it.effect("when the instance loading a shared list fails, another takes the lease at once rather than after it (a minute)", () => {
    const failing = { calls: 0 }
    const first = Effect.sleep("1 second").pipe(
      Effect.andThen(Effect.sync(() => failing.calls++)),
      Effect.andThen(Effect.fail(sourceError("coingecko", "Transient", "test: down")))
    )
    const second = scripted([["usd", "eur"]])
    return Effect.gen(function*() {
      yield* listOf(first)
      yield* TestClock.adjust("500 millis")
      const two = yield* listOf(second.fetch)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(failing.calls, 1)
      assert.strictEqual(second.state.calls, 1, "the lease taken once its holder gave it back")
      assert.deepStrictEqual(yield* two.get(far), ["usd", "eur"])
    }).pipe(Effect.provide(sharedStore()), Effect.scoped)
  })

  it.effect("a request finding nothing held waits for the load running, until its deadline only", () => {
    const slow = { calls: 0 }
    const fetch = Effect.sleep("5 seconds").pipe(Effect.andThen(Effect.sync(() => (slow.calls++, ["usd"]))))
    return Effect.gen(function*() {
      const list = yield* listOf(fetch)
      const waiting = yield* Effect.forkChild(list.get(2_000))
      yield* TestClock.adjust("2 seconds")
      assert.isUndefined(yield* Fiber.join(waiting), "gave up at its deadline")
      yield* TestClock.adjust("3 seconds")
      assert.deepStrictEqual(yield* list.get(0), ["usd"], "the load went on and landed")
      assert.strictEqual(slow.calls, 1)
    }).pipe(Effect.provide(CopyStore.layerMemory()), Effect.scoped)
  })
})
