/**
 * Single flight in copies/Copies.ts: concurrent readers of a key share one fetch; cold keys read
 * together share one fetch when batched, one each otherwise; a key being fetched is joined, not fetched
 * again; a reader after a flight ended starts a new one, even right after a failure; a reader giving up
 * neither cancels the fetch nor loses what it brings; a failing fetch serves the last good copy, stale.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Schema } from "effect"
import { TestClock } from "effect/testing"
import { makeCopies } from "../../../../src/rates/copies/Copies.ts"
import { CopyStore } from "../../../../src/rates/copies/CopyStore.ts"
import { freshFor } from "../../../../src/rates/copies/entry.ts"
import { Charge, sourceError, spendingUntil } from "../../../../src/rates/upstream.ts"

const far = Number.MAX_SAFE_INTEGER
const charge = Charge.request("ip:192.0.2.1")

/** Copies of numbers whose fetch the test holds at `gate` and counts: each call, with the keys it was asked. */
const counted = (options: { readonly batched?: boolean; readonly fail?: () => boolean } = {}) =>
  Effect.gen(function*() {
    const gate = yield* Deferred.make<void>()
    const calls: Array<ReadonlyArray<string>> = []
    const copies = yield* makeCopies<number>({
      name: "numbers",
      source: "coingecko",
      value: Schema.Finite,
      timing: () => freshFor(Duration.minutes(1)),
      fetch: (keys) =>
        Effect.suspend(() => {
          calls.push(keys)
          return Deferred.await(gate).pipe(Effect.andThen(options.fail?.() === true
            ? Effect.fail(sourceError("coingecko", "Transient", "test: down"))
            : Effect.succeed(keys.map((key) => [key, key.length] as const))))
        }),
      fetchedTogether: options.batched === true ? { groupOf: () => "numbers", keys: () => [] } : undefined,
      onFailure: { lastGoodMs: Duration.toMillis(Duration.hours(1)), retryMs: 1_000 }
    })
    return { copies, calls, open: Deferred.succeed(gate, undefined) }
  })

describe("single flight in copies", () => {
  it.effect("concurrent readers of one key share one fetch; other keys fetch on their own", () =>
    Effect.gen(function*() {
      const { calls, copies, open } = yield* counted()
      const fibers = yield* Effect.forEach([..."aaaaab"].map((c, i) => c.repeat(i < 5 ? 1 : 2)), (key) =>
        Effect.forkChild(copies.get(key).pipe(spendingUntil(far, charge)), { startImmediately: true }))
      yield* open
      const results = yield* Effect.forEach(fibers, Fiber.join)
      assert.deepStrictEqual(results.map((r) => r.value), [1, 1, 1, 1, 1, 2])
      assert.deepStrictEqual(calls, [["a"], ["bb"]])
    }).pipe(Effect.provide(CopyStore.layerMemory()), Effect.scoped))

  it.effect("batched: the cold keys of one read in one fetch; a key being fetched is joined", () =>
    Effect.gen(function*() {
      const { calls, copies, open } = yield* counted({ batched: true })
      const first = yield* Effect.forkChild(copies.getAll(["a", "bb"]).pipe(spendingUntil(far, charge)), { startImmediately: true })
      const second = yield* Effect.forkChild(copies.getAll(["bb", "ccc"]).pipe(spendingUntil(far, charge)), { startImmediately: true })
      yield* open
      const [one, two] = [yield* Fiber.join(first), yield* Fiber.join(second)]
      assert.deepStrictEqual(calls, [["a", "bb"], ["ccc"]])
      assert.deepStrictEqual([...one.served].map(([k, v]) => [k, v.value]), [["a", 1], ["bb", 2]])
      assert.deepStrictEqual([...two.served].map(([k, v]) => [k, v.value]), [["bb", 2], ["ccc", 3]])
    }).pipe(Effect.provide(CopyStore.layerMemory()), Effect.scoped))

  it.effect("a reader after a flight ended starts a new one, even right after a failure", () =>
    Effect.gen(function*() {
      let failing = true
      const { calls, copies, open } = yield* counted({ fail: () => failing })
      yield* open
      const first = yield* Effect.exit(copies.get("k").pipe(spendingUntil(far, charge)))
      failing = false
      const second = yield* copies.get("k").pipe(spendingUntil(far, charge))
      assert.isTrue(Exit.isFailure(first))
      assert.strictEqual(second.value, 1)
      assert.strictEqual(calls.length, 2)
    }).pipe(Effect.provide(CopyStore.layerMemory()), Effect.scoped))

  it.effect("a reader giving up (its deadline) neither cancels the fetch for the others nor loses its copy", () =>
    Effect.gen(function*() {
      const { calls, copies, open } = yield* counted()
      const impatient = yield* Effect.forkChild(copies.get("k").pipe(spendingUntil(1_000, charge)), { startImmediately: true })
      const patient = yield* Effect.forkChild(copies.get("k").pipe(spendingUntil(far, charge)), { startImmediately: true })
      yield* TestClock.adjust("1 second")
      const gaveUp = yield* Fiber.await(impatient)
      assert.isTrue(Exit.isFailure(gaveUp))
      yield* open
      assert.strictEqual((yield* Fiber.join(patient)).value, 1)
      assert.strictEqual((yield* copies.get("k").pipe(spendingUntil(far, charge))).value, 1, "the copy landed")
      assert.strictEqual(calls.length, 1)
    }).pipe(Effect.provide(CopyStore.layerMemory()), Effect.scoped))

  it.effect("a fetch that fails once a copy expired serves that copy, stale, and nothing forever", () =>
    Effect.gen(function*() {
      let failing = false
      const { copies, open } = yield* counted({ fail: () => failing })
      yield* open
      assert.isFalse((yield* copies.get("k").pipe(spendingUntil(far, charge))).stale)
      failing = true
      yield* TestClock.adjust("2 minutes")
      const stale = yield* copies.get("k").pipe(spendingUntil(far, charge))
      assert.deepStrictEqual([stale.value, stale.stale, stale.holdsUntil], [1, true, 0])
      yield* TestClock.adjust("2 hours")
      assert.isTrue(Exit.isFailure(yield* Effect.exit(copies.get("k").pipe(spendingUntil(far, charge)))), "no copy kept past lastGoodMs")
    }).pipe(Effect.provide(CopyStore.layerMemory()), Effect.scoped))
})

describe("instances sharing a store (Redis): one load at a time with `loadLeaseMs`", () => {
  /** One store as two instances see it through Redis: values and leases shared, what each instance holds its own. */
  const sharedStore = () => {
    const memory = CopyStore.makeMemory()
    const leases = new Set<string>()
    return CopyStore.of({
      get: memory.get,
      set: memory.set,
      shared: true,
      claim: (key) => Effect.sync(() => leases.has(key) ? "held" : (leases.add(key), "taken")),
      release: (key) => Effect.sync(() => void leases.delete(key))
    })
  }
  const instance = (calls: Array<string>, gate: Deferred.Deferred<void>) =>
    makeCopies<number>({
      name: "tickers",
      source: "coinbase",
      value: Schema.Finite,
      timing: () => freshFor(Duration.seconds(30)),
      fetch: (keys) => Effect.suspend(() => {
        calls.push(...keys)
        return Effect.as(Deferred.await(gate), keys.map((key) => [key, key.length] as const))
      }),
      onFailure: { lastGoodMs: 0, retryMs: 1_000 },
      loadLeaseMs: 3_000
    })

  it.live("two instances asking one key at once make one call: the second waits for the first's copy", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const [a, b] = yield* Effect.all([instance(calls, gate), instance(calls, gate)])
      const first = yield* Effect.forkChild(a.get("btc").pipe(spendingUntil(Date.now() + 5_000, charge)), { startImmediately: true })
      const second = yield* Effect.forkChild(b.get("btc").pipe(spendingUntil(Date.now() + 5_000, charge)), { startImmediately: true })
      yield* Effect.sleep("100 millis")
      yield* Deferred.succeed(gate, undefined)
      assert.deepStrictEqual([(yield* Fiber.join(first)).value, (yield* Fiber.join(second)).value], [3, 3])
      assert.deepStrictEqual(calls, ["btc"])
    }).pipe(Effect.provide(Layer.sync(CopyStore, sharedStore)), Effect.scoped))

  it.live("a store that does not answer the claim (Redis down or slow): the copy is fetched at once, as its reader waits", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const gate = yield* Deferred.make<void>()
      yield* Deferred.succeed(gate, undefined)
      const copies = yield* instance(calls, gate)
      const started = Date.now()
      assert.strictEqual((yield* copies.get("btc").pipe(spendingUntil(Date.now() + 5_000, charge))).value, 3)
      assert.deepStrictEqual(calls, ["btc"])
      assert.isBelow(Date.now() - started, 200, "no wait for the lease")
    }).pipe(Effect.provide(Layer.succeed(CopyStore)(CopyStore.of({ ...CopyStore.makeMemory(), shared: true, claim: () => Effect.succeed("no answer") }))), Effect.scoped))
})
