/**
 * The month's credits as the service keeps them (src/rates/credits/MonthlyBudget.ts): in a DurableCell
 * that outlives the process (files under DATA_DIR) or is shared by every instance (Redis), so that neither
 * a restart nor a second instance adds credits (on files too: two processes on one DATA_DIR); a store
 * outage never stops the answers; one log line when the pace holds a refresh back; the credits in the metrics.
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
import { AppConfig } from "../../../src/config/AppConfig.ts"
import { metricsText } from "../../../src/observability/metrics.ts"
import { DurableCell, DurableCellError } from "../../../src/platform/durableCell/DurableCell.ts"
import { makeFileCell } from "../../../src/platform/durableCell/file.ts"
import * as PostgresCell from "../../../src/platform/durableCell/postgres.ts"
import { makeRedisCell } from "../../../src/platform/durableCell/redis.ts"
import { LEDGER, makeMonthlyBudget } from "../../../src/rates/coingecko/credits/MonthlyBudget.ts"
import { planFor } from "../../../src/rates/coingecko/credits/monthlyCredits.ts"
import { freshDatabase } from "../../scale/support.ts"
import { configFrom } from "../../support/config.ts"

const DEMO = planFor(10_000)
const NOW = Date.parse("2026-11-25T12:00:00Z")

/** Spends `kind` credits until refused; how many were granted. */
const spendAll = (budget: Effect.Success<ReturnType<typeof makeMonthlyBudget>>, kind: "cold" | "refresh") =>
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
      assert.strictEqual(yield* spendAll(first, "cold"), 150)
      // "Restarted": a new process's budget on the same files, at the same moment.
      const second = yield* makeMonthlyBudget(DEMO, yield* makeFileCell(dir))
      assert.strictEqual(yield* spendAll(second, "cold"), 0)
      // Credits come back with time only, at the cold part's pace (the refresh part is full: all of it).
      yield* TestClock.adjust(`${Math.ceil(10 / DEMO.ratePerMs)} millis`)
      assert.strictEqual(yield* spendAll(second, "cold"), 10)
      const snapshot = yield* second.snapshot
      assert.strictEqual(snapshot.state.spent, 160)
    }))

  it.live("two processes on one directory (each its own cell and lock, as a rolling deploy has) spend one reserve at most", () =>
    Effect.gen(function*() {
      const dir = freshDir()
      // Plan 1,000: a reserve of 20, of which 15 cold.
      const plan = planFor(1_000)
      const a = yield* makeMonthlyBudget(plan, yield* makeFileCell(dir))
      const b = yield* makeMonthlyBudget(plan, yield* makeFileCell(dir))
      const outcomes = yield* Effect.all(
        Array.from({ length: 80 }, (_, i) => Effect.result((i % 2 === 0 ? a : b).spend("cold"))),
        { concurrency: 8 }
      )
      const granted = outcomes.filter((o) => o._tag === "Success").length
      assert.isAtMost(granted, 15, "credits granted by the two processes together")
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
        assert.strictEqual(yield* spendAll(budget, "refresh"), 50)
        for (let i = 0; i < 5; i++) {
          const refused = yield* Effect.flip(budget.spend("refresh"))
          assert.strictEqual(refused.kind, "rate-limited")
          assert.strictEqual(refused.retryAfterSeconds, Math.ceil(1 / DEMO.rate.refresh / 1000))
        }
      }).pipe(Effect.provide(capture))
      const held = lines.filter((line) => line.includes("holds a refresh back"))
      assert.strictEqual(held.length, 1, lines.join("\n"))
      assert.include(held[0]!, "nextCreditInSeconds")
      // Spent and left this month, as the ledger counts them.
      assert.match(metricsText(), /upstream_credits_spent_month\{[^}]*upstream="coingecko"[^}]*\} 50\b/)
      assert.match(metricsText(), /upstream_credits_left_month\{[^}]*upstream="coingecko"[^}]*\} 9950\b/)
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
      assert.strictEqual(outcomes.filter((o) => o._tag === "Success").length, 150)
      assert.strictEqual((yield* a.snapshot).state.spent, 150)
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
      assert.strictEqual(outcomes.filter((o) => o._tag === "Success").length, 150)
      const restarted = yield* instance
      assert.strictEqual(yield* spendAll(restarted, "cold"), 0)
      assert.strictEqual((yield* restarted.snapshot).state.spent, 150)
    }).pipe(Effect.scoped))
})

describe("a ledger store that fails", () => {
  it.effect("never stops the calls: the process goes on from the last state it read", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      let down = false
      const values = new Map<string, string>()
      const flaky = DurableCell.of({
        store: "flaky",
        get: (name) => down ? Effect.fail(new DurableCellError({ store: "flaky", reason: "connection refused" })) : Effect.succeed(values.get(name)),
        compareAndSet: (name, expected, next) =>
          down ? Effect.fail(new DurableCellError({ store: "flaky", reason: "connection refused" })) : Effect.sync(() => {
            if (values.get(name) !== expected) return false
            values.set(name, next)
            return true
          })
      })
      const budget = yield* makeMonthlyBudget(DEMO, flaky)
      for (let i = 0; i < 140; i++) yield* budget.spend("cold")
      down = true
      // The last state read: 10 cold credits left, not a new reserve.
      assert.strictEqual(yield* spendAll(budget, "cold"), 10)
      down = false
      // Back: the store's state rules again (its 10 left); the outage cost at most one reserve's remainder.
      assert.strictEqual(yield* spendAll(budget, "cold"), 10)
      assert.strictEqual(yield* spendAll(budget, "cold"), 0)
    }))

  it.effect("a process that never read the store starts as a new ledger does", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const broken = DurableCell.of({
        store: "broken",
        get: () => Effect.fail(new DurableCellError({ store: "broken", reason: "connection refused" })),
        compareAndSet: () => Effect.fail(new DurableCellError({ store: "broken", reason: "connection refused" }))
      })
      const budget = yield* makeMonthlyBudget(DEMO, broken)
      assert.strictEqual(yield* spendAll(budget, "cold"), 150)
    }))
})


