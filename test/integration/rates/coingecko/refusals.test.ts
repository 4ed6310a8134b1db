/**
 * Issue 35's done-when for CoinGecko's credits: CoinGecko refusing everything (403, then 500) on the Demo
 * plan, then answering. The service's rates capability runs in this process on a clock the test moves (its
 * waits real), against the emulator, its ledger in a cell that outlives a restart; a visitor asks an
 * uncurated coin (PEPE: the coin index must be loaded) and a curated one (BTC) every step. Then:
 *   - the ledger's `upstream_credits_spent_month` equals the emulator's count of answers 200 (what
 *     CoinGecko bills: a refused call costs no credit);
 *   - PEPE answers 200 within 3 minutes of CoinGecko answering again;
 * from a cold start, after a simulated week of refusals followed by a restart, and from a ledger an older
 * build (which charged every attempt) left drained by such a week.
 */
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { metricsText } from "../../../../src/observability/metrics.ts"
import { DurableCell, type DurableCellShape } from "../../../../src/platform/durableCell/DurableCell.ts"
import { makeMemoryCell } from "../../../../src/platform/durableCell/memory.ts"
import { LEDGER, MonthlyBudget } from "../../../../src/rates/coingecko/credits/MonthlyBudget.ts"
import * as Rates from "../../../../src/rates/layer.ts"
import { RatesProvider } from "../../../../src/rates/RatesProvider.ts"
import { type CoinGeckoEmulator, type FaultMode, startCoinGeckoEmulator } from "../../../emulators/coingecko.ts"
import { type MovableClock, movableClock } from "../../../support/clock.ts"
import { EMULATOR_NOW } from "../../../support/rates.ts"

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

let emulator: CoinGeckoEmulator
beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: EMULATOR_NOW })
})
afterAll(() => emulator.close())

/** One run of the service: its clock, its ledger's cell, and the instance running now (a restart replaces it). */
const makeRun = (cell: DurableCellShape = makeMemoryCell()) => {
  const clock: MovableClock = movableClock(EMULATOR_NOW)
  emulator.setFault("none")
  emulator.setNow(EMULATOR_NOW)
  emulator.resetStats()
  let instance: { readonly scope: Scope.Closeable; readonly context: Context.Context<RatesProvider | MonthlyBudget> } | undefined
  const onClock = <A, E>(effect: Effect.Effect<A, E, RatesProvider | MonthlyBudget>) =>
    Effect.runPromise(effect.pipe(Effect.provide(instance!.context), Effect.provide(clock.layer)))

  /** The service as built for production, on the Demo plan (10,000 credits), CoinGecko alone. */
  const start = async () => {
    const rates = Rates.layerTest({
      env: { COINGECKO_BASE_URL: emulator.url, COINGECKO_RETRIES: "1", COINGECKO_RETRY_BASE_MS: "1", COINGECKO_CALLS_PER_MONTH: "10000" },
      cell: Layer.succeed(DurableCell)(cell)
    })
    const scope = await Effect.runPromise(Scope.make())
    const context = await Effect.runPromise(Layer.buildWithScope(rates, scope).pipe(Effect.provide(clock.layer)))
    instance = { scope, context }
  }
  const stop = async () => {
    if (instance !== undefined) await Effect.runPromise(Scope.close(instance.scope, Exit.void))
    instance = undefined
  }

  /** A visitor's query: its status as the API would answer it (200, 502 or 503). */
  const ask = (symbol: string) =>
    onClock(Effect.flatMap(RatesProvider, (rates) => rates.historical({ symbols: [symbol], currency: "usd", days: 7, caller: `ip:198.51.100.${symbol.length}` }))
      .pipe(Effect.match({ onSuccess: () => 200, onFailure: (error) => (error._tag === "RatesUnavailableError" ? 503 : 502) })))

  /** `ms` of CoinGecko in `mode`, the clock moved by `stepMs` with both coins asked each step. */
  const refuse = async (mode: FaultMode, ms: number, stepMs: number) => {
    emulator.setFault(mode)
    const statuses = new Set<number>()
    for (let elapsed = 0; elapsed < ms; elapsed += stepMs) {
      clock.advance(stepMs)
      emulator.setNow(clock.clock.currentTimeMillisUnsafe())
      for (const status of await Promise.all([ask("PEPE"), ask("BTC")])) statuses.add(status)
    }
    return statuses
  }

  /** CoinGecko answers again: the simulated time until PEPE first answers 200 (asked every 20 s, 10 minutes at most). */
  const recover = async () => {
    emulator.setFault("none")
    const recoveredAt = clock.clock.currentTimeMillisUnsafe()
    for (let elapsed = 0; elapsed <= 10 * MINUTE; elapsed += 20_000) {
      if (elapsed > 0) clock.advance(20_000)
      emulator.setNow(clock.clock.currentTimeMillisUnsafe())
      const [pepe] = await Promise.all([ask("PEPE"), ask("BTC")])
      if (pepe === 200) return clock.clock.currentTimeMillisUnsafe() - recoveredAt
    }
    return Number.POSITIVE_INFINITY
  }

  /** The ledger's count this month, once no call is in flight, and what its metric says. */
  const spent = async () => {
    for (let waited = 0; emulator.stats().inFlight > 0 && waited < 2_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10))
    await new Promise((resolve) => setTimeout(resolve, 50))
    const ledger = await onClock(Effect.map(MonthlyBudget, (budget) => budget))
    const state = await onClock(ledger.snapshot)
    const metric = /^upstream_credits_spent_month\{[^}]*upstream="coingecko"[^}]*\} (\d+)$/m.exec(metricsText())
    return { ledger: state.state.spent, metric: Number(metric?.[1]) }
  }

  return { cell, start, stop, refuse, recover, spent }
}

describe("CoinGecko refusing everything, then answering (issue 35, finding 1)", () => {
  it("from a cold start: the ledger spends what CoinGecko billed, and an uncurated coin answers within 3 minutes of recovery", async () => {
    const run = makeRun()
    await run.start()
    try {
      expect(await run.refuse("403", 30 * MINUTE, MINUTE)).toEqual(new Set([502, 503]))
      expect(await run.refuse("5xx", 30 * MINUTE, MINUTE)).toEqual(new Set([502, 503]))
      expect(emulator.stats().credits).toBe(0)
      const recovery = await run.recover()
      expect(recovery).toBeLessThanOrEqual(3 * MINUTE)
      const { ledger, metric } = await run.spent()
      console.info(`cold start, an hour of refusals: ${emulator.stats().total} calls, ${emulator.stats().credits} answered 200, the ledger spent ${ledger}; PEPE 200 ${recovery / 1000} s after the recovery`)
      expect(emulator.stats().credits).toBeGreaterThan(0)
      expect(ledger).toBe(emulator.stats().credits)
      expect(metric).toBe(emulator.stats().credits)
    } finally {
      await run.stop()
    }
  }, 120_000)

  it("after a simulated week of refusals and a restart: the same", async () => {
    const run = makeRun()
    await run.start()
    try {
      await run.refuse("403", 6 * DAY, HOUR)
      await run.refuse("5xx", DAY, HOUR)
      await run.stop()
      await run.start()
      await run.refuse("5xx", 10 * MINUTE, MINUTE)
      const calls = emulator.stats().total
      const recovery = await run.recover()
      expect(recovery).toBeLessThanOrEqual(3 * MINUTE)
      const { ledger, metric } = await run.spent()
      console.info(`a week of refusals and a restart: ${emulator.stats().total} calls, ${emulator.stats().credits} answered 200, the ledger spent ${ledger}; PEPE 200 ${recovery / 1000} s after the recovery`)
      expect(emulator.stats().total).toBeGreaterThan(calls)
      expect(ledger).toBe(emulator.stats().credits)
      expect(metric).toBe(emulator.stats().credits)
    } finally {
      await run.stop()
    }
  }, 240_000)

  it("from a ledger an older build drained with such a week (every attempt charged): recovered on the next start", async () => {
    const cell = makeMemoryCell()
    // As that build left it: every part empty, 2,000 attempts counted this month, and no word of what it counted.
    await Effect.runPromise(
      cell.compareAndSet(LEDGER, undefined, JSON.stringify({ lists: 0, cold: 0, refresh: 0, at: EMULATOR_NOW - MINUTE, month: "2026-11", spent: 2_000 }))
    )
    const run = makeRun(cell)
    await run.start()
    try {
      const recovery = await run.recover()
      expect(recovery).toBeLessThanOrEqual(3 * MINUTE)
      const { ledger } = await run.spent()
      console.info(`a ledger an older build drained: PEPE 200 ${recovery / 1000} s after the start; ${emulator.stats().credits} answered 200, the ledger at ${ledger}`)
      expect(ledger).toBe(2_000 + emulator.stats().credits)
    } finally {
      await run.stop()
    }
  }, 120_000)
})
