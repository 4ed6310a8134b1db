/**
 * The month's credits as the service keeps them (src/rates/coingecko/credits/MonthlyBudget.ts): in a
 * DurableCell that outlives the process (files under DATA_DIR) or is shared by every instance (Redis,
 * PostgreSQL), so that neither a restart nor a second instance adds credits; without its store a process
 * spends its share of the pace only, from nothing, and what it spent is added when the store is back (issue
 * 27, finding 1); the ledger kept on the store's clock, repaired when out of its bounds (finding 3); one log
 * line when the pace holds a refresh back; the credits in the metrics. A credit is spent when CoinGecko
 * billed its call (issue 35, finding 1): held while the call is in flight, given back otherwise, even
 * through a store outage; a ledger an older build drained with refusals is recovered on its first read.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Logger } from "effect"
import { Redis } from "effect/persistence"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll } from "vitest"
import { AppConfig } from "../../../../src/config/AppConfig.ts"
import { metricsText } from "../../../../src/observability/metrics.ts"
import { DurableCell, DurableCellError } from "../../../../src/platform/durableCell/DurableCell.ts"
import { makeFileCell } from "../../../../src/platform/durableCell/file.ts"
import * as PostgresCell from "../../../../src/platform/durableCell/postgres.ts"
import { makeRedisCell } from "../../../../src/platform/durableCell/redis.ts"
import { LEDGER, makeMonthlyBudget } from "../../../../src/rates/coingecko/credits/MonthlyBudget.ts"
import { planFor } from "../../../../src/rates/coingecko/credits/monthlyCredits.ts"
import { freshDatabase } from "../../../support/privateServers.ts"
import { configFrom } from "../../../support/config.ts"

const DEMO = planFor(10_000)
const NOW = Date.parse("2026-11-25T12:00:00Z")

/** Spends `kind` credits until refused; how many were granted. */
const spendAll = (budget: Effect.Success<ReturnType<typeof makeMonthlyBudget>>, kind: "lists" | "cold" | "refresh") =>
  Effect.gen(function*() {
    let granted = 0
    while ((yield* Effect.result(budget.spend(kind)))._tag === "Success") granted++
    return granted
  })

describe("the month's credits kept in files under DATA_DIR", () => {
  const dirs: Array<string> = []
  afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))
  const freshDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "credits-"))
    dirs.push(dir)
    return dir
  }

  it.effect("a restart on the same directory adds no credit", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const dir = freshDir()
      const first = yield* makeMonthlyBudget(DEMO, yield* makeFileCell(dir))
      assert.strictEqual(yield* spendAll(first, "cold"), 145)
      // "Restarted": a new process's budget on the same files, at the same moment.
      const second = yield* makeMonthlyBudget(DEMO, yield* makeFileCell(dir))
      assert.strictEqual(yield* spendAll(second, "cold"), 0)
      // Credits come back with time only, at the cold part's pace (the refresh part is full: all of it).
      yield* TestClock.adjust(`${Math.ceil(10 / DEMO.ratePerMs)} millis`)
      assert.strictEqual(yield* spendAll(second, "cold"), 10)
      const snapshot = yield* second.snapshot
      assert.strictEqual(snapshot.state.spent, 155)
    }))

  it.live("two processes on one directory (each its own cell and lock, as a rolling deploy has) spend one reserve at most", () =>
    Effect.gen(function*() {
      const dir = freshDir()
      // Plan 1,000: a reserve of 20, of which 10.5 for cold calls.
      const plan = planFor(1_000)
      const a = yield* makeMonthlyBudget(plan, yield* makeFileCell(dir))
      const b = yield* makeMonthlyBudget(plan, yield* makeFileCell(dir))
      const outcomes = yield* Effect.all(
        Array.from({ length: 80 }, (_, i) => Effect.result((i % 2 === 0 ? a : b).spend("cold"))),
        { concurrency: 8 }
      )
      const granted = outcomes.filter((o) => o._tag === "Success").length
      assert.isAtMost(granted, Math.floor(plan.capacity.cold), "credits granted by the two processes together")
      assert.strictEqual((yield* a.snapshot).state.spent, granted, "the ledger counts every credit granted")
    }))

  it.effect("a ledger file that is not one starts empty, not full", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const dir = freshDir()
      writeFileSync(join(dir, `${LEDGER}.json`), "{ half a ledger")
      const budget = yield* makeMonthlyBudget(DEMO, yield* makeFileCell(dir))
      assert.strictEqual(yield* spendAll(budget, "cold"), 0)
      assert.strictEqual(yield* spendAll(budget, "refresh"), 0)
    }))

  it.effect("says once that the pace holds a refresh back, with when the next credit comes", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const lines: Array<string> = []
      const capture = Logger.layer([Logger.make(({ message }) => void lines.push(JSON.stringify(message)))])
      const budget = yield* makeMonthlyBudget(DEMO, yield* makeFileCell(freshDir()))
      yield* Effect.gen(function*() {
        assert.strictEqual(yield* spendAll(budget, "refresh"), 48)
        for (let i = 0; i < 5; i++) {
          const refused = yield* Effect.flip(budget.spend("refresh"))
          assert.strictEqual(refused.kind, "rate-limited")
          // Half a credit is left: the wait for the other half.
          assert.strictEqual(refused.retryAfterSeconds, Math.ceil(Math.ceil(0.5 / DEMO.rate.refresh) / 1000))
        }
      }).pipe(Effect.provide(capture))
      const held = lines.filter((line) => line.includes("holds a refresh back"))
      assert.strictEqual(held.length, 1, lines.join("\n"))
      assert.include(held[0]!, "nextCreditInSeconds")
      // Spent and left this month, as the ledger counts them.
      assert.match(metricsText(), /upstream_credits_spent_month\{[^}]*upstream="coingecko"[^}]*\} 48\b/)
      assert.match(metricsText(), /upstream_credits_left_month\{[^}]*upstream="coingecko"[^}]*\} 9952\b/)
    }))
})

describe("the month's credits shared through Redis", () => {
  const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
  const prefix = `test-credits-${process.pid}-${Date.now()}:`
  const redisLayer = NodeRedis.layer({ url })
  beforeAll(() => {
    if (process.env.REDIS_URL === undefined) console.warn("REDIS_URL unset: using redis://127.0.0.1:6379")
  })
  afterAll(() =>
    Effect.runPromise(Effect.gen(function*() {
      const redis = yield* Redis.Redis
      yield* redis.send("DEL", `${prefix}${LEDGER}`)
    }).pipe(Effect.provide(redisLayer), Effect.ignore)))

  it.live("two instances spend from one reserve, racing", () =>
    Effect.gen(function*() {
      const redis = yield* Redis.Redis
      const a = yield* makeMonthlyBudget(DEMO, makeRedisCell(redis, prefix))
      const b = yield* makeMonthlyBudget(DEMO, makeRedisCell(redis, prefix))
      // Both at once, 200 attempts each: the compare-and-set lets exactly the reserve through (give or
      // take what comes back during the race, well under one credit).
      const outcomes = yield* Effect.all(
        Array.from({ length: 400 }, (_, i) => Effect.result((i % 2 === 0 ? a : b).spend("cold"))),
        { concurrency: 16 }
      )
      assert.strictEqual(outcomes.filter((o) => o._tag === "Success").length, 145)
      assert.strictEqual((yield* a.snapshot).state.spent, 145)
    }).pipe(Effect.provide(redisLayer)))
})

describe("the month's credits kept in PostgreSQL (DATABASE_URL)", () => {
  let database: Awaited<ReturnType<typeof freshDatabase>>
  beforeAll(async () => {
    database = await freshDatabase()
  }, 30_000)
  afterAll(async () => {
    await database?.drop()
  })
  /** One "instance": its own pool (its own Layer build) on the test's database, and its budget. */
  const instance = Effect.gen(function*() {
    const cell = yield* Layer.build(
      PostgresCell.layerPostgres.pipe(Layer.provide(AppConfig.layer), Layer.provide(configFrom({ DATABASE_URL: database.url })))
    )
    return yield* makeMonthlyBudget(DEMO, Context.get(cell, DurableCell))
  })

  it.live("two instances racing spend one reserve; a third started later finds it spent", () =>
    Effect.gen(function*() {
      const [a, b] = yield* Effect.all([instance, instance], { concurrency: 2 })
      const outcomes = yield* Effect.all(
        Array.from({ length: 300 }, (_, i) => Effect.result((i % 2 === 0 ? a! : b!).spend("cold"))),
        { concurrency: 8 }
      )
      assert.strictEqual(outcomes.filter((o) => o._tag === "Success").length, 145)
      const restarted = yield* instance
      assert.strictEqual(yield* spendAll(restarted, "cold"), 0)
      assert.strictEqual((yield* restarted.snapshot).state.spent, 145)
    }).pipe(Effect.scoped))
})

/** A cell in memory whose store can go away, on a clock of its own (the store's, as Redis' TIME is). */
const storeCell = (clock: { now: number }) => {
  let down = false
  const values = new Map<string, string>()
  const refused = Effect.fail(new DurableCellError({ store: "test", reason: "connection refused" }))
  const cell = DurableCell.of({
    store: "test",
    now: Effect.suspend(() => (down ? refused : Effect.succeed(clock.now))),
    get: (name) => (down ? refused : Effect.succeed(values.get(name))),
    compareAndSet: (name, expected, next) =>
      down ? refused : Effect.sync(() => {
        if (values.get(name) !== expected) return false
        values.set(name, next)
        return true
      })
  })
  return { cell, values, setDown: (value: boolean) => void (down = value) }
}

const MINUTE = 60_000

describe("a ledger store that fails: closed on credits (issue 27, finding 1)", () => {
  it.effect("without its store a process spends nothing at first, then its share of the pace: never a fresh reserve", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const store = storeCell({ now: NOW })
      store.setDown(true)
      const budget = yield* makeMonthlyBudget(DEMO, store.cell, { processes: { current: () => 4 } })
      assert.strictEqual(yield* spendAll(budget, "cold"), 0, "a process that never read the store starts empty")
      // An hour: a quarter of the cold part's pace (the other parts fill first, empty as they start).
      yield* TestClock.adjust(`${60 * MINUTE} millis`)
      const hour = yield* spendAll(budget, "cold")
      assert.isAtMost(hour, Math.ceil((60 * MINUTE * DEMO.ratePerMs) / 4))
      // A replaced worker (a new process) starts empty again, not with a reserve.
      const replaced = yield* makeMonthlyBudget(DEMO, store.cell, { processes: { current: () => 4 } })
      assert.strictEqual(yield* spendAll(replaced, "cold"), 0)
      assert.strictEqual(yield* spendAll(replaced, "lists"), 0)
    }))

  it.effect("what it spent meanwhile is added to the shared ledger when the store answers again", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const clock = { now: NOW }
      const store = storeCell(clock)
      const budget = yield* makeMonthlyBudget(DEMO, store.cell, { processes: { current: () => 2 } })
      for (let i = 0; i < 100; i++) yield* budget.spend("cold")
      store.setDown(true)
      // A request meets the outage: the process's own ledger starts, empty.
      assert.strictEqual(yield* spendAll(budget, "cold"), 0)
      yield* TestClock.adjust(`${120 * MINUTE} millis`)
      const meanwhile = yield* spendAll(budget, "cold")
      assert.isAbove(meanwhile, 0)
      assert.isAtMost(meanwhile, Math.ceil((120 * MINUTE * DEMO.ratePerMs) / 2))
      store.setDown(false)
      clock.now = NOW + 120 * MINUTE
      yield* budget.spend("cold")
      const { state } = yield* budget.snapshot
      assert.strictEqual(state.spent, 100 + meanwhile + 1)
      // The shared levels paid for it too: the two hours came back, less what was spent.
      const expected = 145.5 - 100 + 120 * MINUTE * DEMO.ratePerMs - meanwhile - 1
      assert.closeTo(state.cold, Math.min(145.5, expected), 1e-6)
    }))
})

describe("the ledger on the store's clock, repaired when out of bounds (issue 27, finding 3)", () => {
  /** A budget whose process clock is `aheadMs` ahead of the store's. */
  const onClock = (aheadMs: number, cell: DurableCell["Service"]) =>
    Effect.flatMap(TestClock.adjust(`${aheadMs} millis`), () => makeMonthlyBudget(DEMO, cell))

  it.effect("an instance a day ahead moves the ledger no further than the others: they get credits back at the pace", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const clock = { now: NOW }
      const store = storeCell(clock)
      const onTime = yield* makeMonthlyBudget(DEMO, store.cell)
      // The instance a day ahead spends the cold reserve.
      const ahead = yield* onClock(86_400_000, store.cell)
      assert.strictEqual(yield* spendAll(ahead, "cold"), 145)
      yield* TestClock.setTime(NOW)
      const refused = yield* Effect.flip(onTime.spend("cold"))
      const trueWait = Math.ceil(Math.ceil(0.5 / DEMO.rate.cold) / 1000)
      assert.strictEqual(refused.retryAfterSeconds, trueWait, "Retry-After is the true wait")
      // That wait later, by the store's clock, a credit is there for the instance on time.
      clock.now = NOW + trueWait * 1000
      yield* TestClock.setTime(clock.now)
      yield* onTime.spend("cold")
    }))

  it.effect("a stored value out of bounds is repaired: neither refused for ever nor a full reserve granted", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const clock = { now: NOW }
      const store = storeCell(clock)
      const budget = yield* makeMonthlyBudget(DEMO, store.cell)
      store.values.set(LEDGER, JSON.stringify({ lists: 6, cold: -1e12, refresh: 0, at: NOW, month: "2026-11", spent: 10 }))
      clock.now = NOW + 30 * MINUTE
      yield* TestClock.setTime(clock.now)
      // Half an hour of the cold pace (the refresh part fills first: empty, it takes its own share).
      assert.isAbove(yield* spendAll(budget, "cold"), 0)
      store.values.set(LEDGER, JSON.stringify({ lists: 6, cold: 0, refresh: 0, at: 0, month: "1970-01", spent: 0 }))
      assert.strictEqual(yield* spendAll(budget, "cold"), 0, "not a full reserve")
    }))
})

describe("credits per answer 200 (issue 35, finding 1)", () => {
  it.effect("credits held by calls in flight are not granted twice; those given back (calls not billed) are there again, off the month's count", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const store = storeCell({ now: NOW })
      const budget = yield* makeMonthlyBudget(DEMO, store.cell)
      const inFlight = []
      for (let i = 0; i < 145; i++) inFlight.push(yield* budget.spend("cold"))
      assert.strictEqual((yield* Effect.flip(budget.spend("cold"))).kind, "rate-limited", "145 in flight hold the cold part")
      // 40 were refused by CoinGecko: their credits come back, and the month counts the 105 billed.
      for (const held of inFlight.slice(0, 40)) yield* held.giveBack(1)
      // Giving back more than was held gives back nothing more.
      yield* inFlight[0]!.giveBack(1)
      assert.strictEqual((yield* budget.snapshot).state.spent, 105)
      assert.strictEqual(yield* spendAll(budget, "cold"), 40)
      assert.match(metricsText(), /upstream_credits_spent_month\{[^}]*upstream="coingecko"[^}]*\} 145\b/)
    }))

  it.effect("a credit given back while the store is away reaches the shared ledger when it answers again", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const store = storeCell({ now: NOW })
      const budget = yield* makeMonthlyBudget(DEMO, store.cell)
      const held = yield* budget.spend("lists", 6)
      assert.strictEqual(yield* spendAll(budget, "lists"), 0)
      store.setDown(true)
      // Five of the six calls were refused while the store was away.
      yield* held.giveBack(5)
      store.setDown(false)
      assert.strictEqual(yield* spendAll(budget, "lists"), 5)
      assert.strictEqual((yield* budget.snapshot).state.spent, 6)
    }))

  it.effect("a ledger an older build drained with refusals (every attempt charged) is recovered on its first read, within the month's allowance, once, logged", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const store = storeCell({ now: NOW })
      // November 25th: 3,000 attempts counted, every part drained. The month allows 200 + 24.5 days of pace.
      store.values.set(LEDGER, JSON.stringify({ lists: 0, cold: 0, refresh: 0, at: NOW, month: "2026-11", spent: 3_000 }))
      const lines: Array<string> = []
      const capture = Logger.layer([Logger.make(({ message }) => void lines.push(JSON.stringify(message)))])
      const budget = yield* makeMonthlyBudget(DEMO, store.cell)
      yield* Effect.gen(function*() {
        assert.strictEqual(yield* spendAll(budget, "lists"), 6, "the lists' part full again: the coin index loads at once")
        assert.strictEqual(yield* spendAll(budget, "cold"), 145)
        assert.strictEqual(yield* spendAll(budget, "refresh"), 48)
      }).pipe(Effect.provide(capture))
      assert.strictEqual(lines.filter((line) => line.includes("charged refused calls")).length, 1, lines.join("\n"))
      assert.strictEqual((yield* budget.snapshot).state.spent, 3_000 + 6 + 145 + 48)
      assert.strictEqual(JSON.parse(store.values.get(LEDGER)!).billed, "answers")
      // A ledger kept by this build, drained by credits CoinGecko billed, is not "recovered".
      store.values.set(LEDGER, JSON.stringify({ lists: 0, cold: 0, refresh: 0, at: NOW, month: "2026-11", spent: 3_000, billed: "answers" }))
      assert.strictEqual(yield* spendAll(budget, "cold"), 0)
    }))
})
