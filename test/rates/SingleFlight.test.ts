import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { makeSingleFlight } from "../../src/rates/SingleFlight.ts"

describe("SingleFlight", () => {
  it.effect("concurrent callers of one key share one execution; other keys run separately", () =>
    Effect.gen(function*() {
      const flights = yield* makeSingleFlight
      const gate = yield* Deferred.make<void>()
      let runs = 0
      const work = (value: string) => Effect.sync(() => runs++).pipe(Effect.andThen(Deferred.await(gate)), Effect.as(value))
      const fibers = yield* Effect.forEach(
        [..."aaaaab"],
        // Forked from this fiber (sequential forEach), so the callers live as long as the test.
        (key) => Effect.forkChild(flights.run(key, work(key.toUpperCase())), { startImmediately: true })
      )
      assert.strictEqual(flights.inFlight(), 2)
      yield* Deferred.succeed(gate, undefined)
      const results = yield* Effect.forEach(fibers, Fiber.join)
      assert.deepStrictEqual(results, ["A", "A", "A", "A", "A", "B"])
      assert.strictEqual(runs, 2)
      assert.strictEqual(flights.inFlight(), 0)
    }))

  it.effect("a call after a flight ended starts a new one, even right after a failure", () =>
    Effect.gen(function*() {
      const flights = yield* makeSingleFlight
      let runs = 0
      const first = yield* Effect.exit(flights.run("k", Effect.suspend(() => (runs++, Effect.fail("boom")))))
      const second = yield* flights.run("k", Effect.sync(() => (runs++, "ok")))
      assert.isTrue(Exit.isFailure(first))
      assert.strictEqual(second, "ok")
      assert.strictEqual(runs, 2)
    }))

  it.effect("a caller giving up does not cancel the work for the others", () =>
    Effect.gen(function*() {
      const flights = yield* makeSingleFlight
      const gate = yield* Deferred.make<void>()
      const work = Deferred.await(gate).pipe(Effect.as(42))
      const impatient = yield* Effect.forkChild(flights.run("k", work), { startImmediately: true })
      const patient = yield* Effect.forkChild(flights.run("k", work), { startImmediately: true })
      yield* Fiber.interrupt(impatient)
      yield* Deferred.succeed(gate, undefined)
      assert.strictEqual(yield* Fiber.join(patient), 42)
    }))
})
