/**
 * The live provider while the emulated upstream misbehaves: every fault answers with the documented
 * typed error within the time budget, cached data is served stale instead, the circuit opens and fails
 * fast, and the upstream's Retry-After reaches the caller.
 */
import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type CoinGeckoEmulator, type FaultMode, startCoinGeckoEmulator } from "../../../emulators/coingecko.ts"
import { emulatedDailyPrices } from "../../../emulators/coingecko-data.ts"
import * as Rates from "../../../../src/rates/layer.ts"
import type { RatesError } from "../../../../src/rates/RatesProvider.ts"
import { EMULATOR_NOW, fastEnv, historical, liveRates, makeAgeableCache } from "../../../support/rates.ts"
import { timed } from "../../../support/ownTime.ts"
import { PLENTY } from "../../../support/credits.ts"

let emulator: CoinGeckoEmulator

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ now: EMULATOR_NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.resetStats()
})

const describeError = (error: RatesError) =>
  error._tag === "RatesUnavailableError" ? `${error._tag}(${error.retryAfterSeconds})` : error._tag

interface FaultCase {
  readonly mode: FaultMode
  readonly expected: string
  /** Upstream market_chart/range calls for the coin: 2 when retried once, 1 when not, 0 when a cool-down blocks it. */
  readonly chartCalls: number
}

const faultCases: ReadonlyArray<FaultCase> = [
  { mode: "5xx", expected: "RatesUpstreamError", chartCalls: 2 },
  { mode: "hang", expected: "RatesUpstreamError", chartCalls: 2 },
  { mode: "reset", expected: "RatesUpstreamError", chartCalls: 2 },
  { mode: "truncated", expected: "RatesUpstreamError", chartCalls: 1 },
  { mode: "wrong-shape", expected: "RatesUpstreamError", chartCalls: 1 },
  { mode: "401", expected: "RatesUpstreamError", chartCalls: 1 },
  // A 429 is never retried, and puts every later call on hold: only the first call reaches the upstream.
  { mode: "429", expected: "RatesUnavailableError(42)", chartCalls: 0 },
  { mode: "429-no-retry-after", expected: "RatesUnavailableError(13)", chartCalls: 0 },
  { mode: "429-html", expected: "RatesUnavailableError(13)", chartCalls: 0 }
]

describe("each upstream fault yields the documented error, fast", () => {
  for (const { chartCalls, expected, mode } of faultCases) {
    it.live(`${mode} → ${expected}`, () =>
      Effect.gen(function*() {
        emulator.setFault({ mode, retryAfterSeconds: 42 })
        const { ownMs, result } = yield* timed(historical({ symbols: ["BTC"] }))
        assert.strictEqual(result._tag, "Failure", "no answer without data")
        if (result._tag === "Failure") assert.strictEqual(describeError(result.failure), expected)
        assert.isBelow(ownMs, 3_000, "well inside the 10 s promise with the test budget of 2 s")
        assert.strictEqual(emulator.stats().byPath["/coins/bitcoin/market_chart/range"] ?? 0, chartCalls)
        if (chartCalls === 0) assert.strictEqual(emulator.stats().total, 1)
      }).pipe(Effect.provide(liveRates(fastEnv(emulator.url)))))
  }

  it.live("the request budget bounds the answer time even when timeouts × attempts exceed it", () =>
    Effect.gen(function*() {
      emulator.setFault("hang")
      const { elapsedMs, ownMs, result } = yield* timed(historical({ symbols: ["BTC", "ETH"] }))
      assert.strictEqual(result._tag === "Failure" ? result.failure._tag : "Success", "RatesUpstreamError")
      assert.isAtLeast(elapsedMs, 1_150)
      assert.isBelow(ownMs, 2_000)
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url, {
      COINGECKO_TIMEOUT_MS: "1000",
      COINGECKO_RETRIES: "2",
      COINGECKO_REQUEST_BUDGET_MS: "1200"
    })))))

  it.live("a hanging currency list costs at most a third of the budget, and the data still arrives", () =>
    Effect.gen(function*() {
      emulator.setFault({ mode: "hang", paths: ["/simple/supported_vs_currencies"] })
      const { elapsedMs, ownMs, result } = yield* timed(historical({ symbols: ["BTC"] }))
      assert.strictEqual(result._tag, "Success")
      if (result._tag === "Success") assert.deepStrictEqual(result.success.rates.map((r) => r.id), ["bitcoin"])
      assert.isAtLeast(elapsedMs, 600)
      assert.isBelow(ownMs, 1_400)
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url)))))

  it.live("a transient failure is retried and the answer is complete", () =>
    Effect.gen(function*() {
      emulator.setFault({ mode: "5xx", paths: ["/coins/markets"], times: 1 })
      const result = yield* historical({ symbols: ["BTC"] })
      assert.strictEqual(result.stale, false)
      assert.strictEqual(emulator.stats().byQuery["markets:ids"], 2)
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url)))))
})

describe("rate limits", () => {
  it.live("after a 429 with Retry-After, later calls wait it out without touching the upstream", () =>
    Effect.gen(function*() {
      emulator.setFault({ mode: "429", retryAfterSeconds: 42, paths: ["/coins/bitcoin/market_chart/range"], times: 1 })
      const first = yield* Effect.flip(historical({ symbols: ["BTC"] }))
      assert.strictEqual(describeError(first), "RatesUnavailableError(42)")
      const callsSoFar = emulator.stats().total
      const second = yield* Effect.flip(historical({ symbols: ["ETH"] }))
      assert.strictEqual(second._tag, "RatesUnavailableError")
      if (second._tag === "RatesUnavailableError") assert.isAtLeast(second.retryAfterSeconds, 41)
      assert.strictEqual(emulator.stats().total, callsSoFar, "the cool-down held every call back")
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url)))))

  it.live("an exhausted calls-per-minute budget answers 503-style at once instead of queueing", () =>
    Effect.gen(function*() {
      yield* historical({ symbols: ["NOPE"] }) // waits for the lists of start-up: 3 calls of the 5
      const { ownMs, result } = yield* timed(historical({ symbols: ["BTC", "ETH", "SOL"] }))
      assert.strictEqual(result._tag, "Failure")
      if (result._tag === "Failure") {
        assert.strictEqual(result.failure._tag, "RatesUnavailableError")
        if (result.failure._tag === "RatesUnavailableError") {
          assert.isAtLeast(result.failure.retryAfterSeconds, 1)
          assert.isAtMost(result.failure.retryAfterSeconds, 12) // one token per 12 s at 5/min
        }
      }
      assert.strictEqual(emulator.stats().total, 5)
      assert.isBelow(ownMs, 1_000)
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url, { COINGECKO_CALLS_PER_MIN: "5", COINGECKO_REFRESH_RESERVE_PCT: "0" })))))
})

describe("circuit breaker", () => {
  it.live("opens after repeated failed requests, fails fast without calling the upstream, and closes after a good probe", () =>
    Effect.gen(function*() {
      yield* historical({ symbols: ["NOPE"] }) // the lists of start-up are loaded
      emulator.setFault("5xx")
      // Three requests whose calls all fail (latest prices, two series): one failure each.
      for (let i = 0; i < 3; i++) {
        const failed = yield* Effect.flip(historical({ symbols: ["BTC", "ETH"] }))
        assert.strictEqual(failed._tag, "RatesUpstreamError", `request ${i + 1}`)
      }

      emulator.resetStats()
      const { ownMs, result } = yield* timed(historical({ symbols: ["BTC"] }))
      assert.strictEqual(result._tag === "Failure" ? result.failure._tag : "Success", "RatesUnavailableError")
      if (result._tag === "Failure" && result.failure._tag === "RatesUnavailableError") {
        assert.strictEqual(result.failure.retryAfterSeconds, 1)
        assert.match(result.failure.reason, /circuit-open/)
      }
      assert.isBelow(ownMs, 100)
      assert.strictEqual(emulator.stats().total, 0)

      emulator.setFault("none")
      yield* Effect.sleep("900 millis")
      const recovered = yield* historical({ symbols: ["BTC"] })
      assert.deepStrictEqual(recovered.rates.map((r) => r.id), ["bitcoin"])
      assert.strictEqual(recovered.stale, false)
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url, {
      COINGECKO_RETRIES: "0",
      COINGECKO_BREAKER_FAILURES: "3",
      COINGECKO_BREAKER_OPEN_MS: "800"
    })))))

  it.live("a failing auxiliary list never opens it", () =>
    Effect.gen(function*() {
      emulator.setFault({ mode: "5xx", paths: ["/simple/supported_vs_currencies", "/coins/list"] })
      for (let i = 0; i < 5; i++) yield* Effect.flip(historical({ symbols: ["PEPE"] })) // no index: 503
      const result = yield* historical({ symbols: ["BTC"] })
      assert.deepStrictEqual(result.rates.map((r) => r.id), ["bitcoin"])
      assert.isAtMost(emulator.stats().byPath["/simple/supported_vs_currencies"] ?? 0, 1, "its failure is remembered")
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url, { COINGECKO_BREAKER_FAILURES: "1" })))))
})

describe("stale-if-error", () => {
  it.live("serves the last good latest prices with stale: true once fresh ones expired during an outage", () =>
    Effect.gen(function*() {
      const fresh = yield* historical({ symbols: ["BTC", "ETH"] })
      assert.strictEqual(fresh.stale, false)
      yield* Effect.sleep("2100 millis") // past COINGECKO_LATEST_TTL_S, and as long again (served while refreshed)
      emulator.setFault("5xx")
      emulator.resetStats()
      const stale = yield* historical({ symbols: ["BTC", "ETH"] })
      assert.strictEqual(stale.stale, true)
      assert.deepStrictEqual(stale.rates, fresh.rates)
      assert.strictEqual(stale.asOf, fresh.asOf, "asOf tells when the served prices were fetched")
      assert.strictEqual(emulator.stats().byPath["/coins/markets"], 2, "it did try the upstream (and retried once)")
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url, { COINGECKO_LATEST_TTL_S: "1", COINGECKO_CALLS_PER_MONTH: PLENTY })))))

  const outages: ReadonlyArray<FaultMode> = ["5xx", "hang", "429", "401", "wrong-shape"]
  for (const mode of outages) {
    it.live(`serves every cached coin (series included) with stale: true during a ${mode} outage; an uncached one still fails`, () => {
      const cache = makeAgeableCache()
      return Effect.gen(function*() {
        const fresh = yield* historical({ symbols: ["BTC", "HOT", "NOPE"], currency: "eur" })
        cache.expireFreshEntries()
        emulator.setFault({ mode, retryAfterSeconds: 42 })
        const { ownMs, result } = yield* timed(historical({ symbols: ["BTC", "HOT", "NOPE"], currency: "eur" }))
        assert.strictEqual(result._tag, "Success")
        if (result._tag === "Success") {
          assert.strictEqual(result.success.stale, true)
          assert.deepStrictEqual(result.success.rates, fresh.rates)
          assert.deepStrictEqual(result.success.unknown, ["NOPE"])
        }
        assert.isBelow(ownMs, 3_000)
        const uncached = yield* Effect.flip(historical({ symbols: ["BTC", "SOL"], currency: "eur" }))
        assert.include(["RatesUpstreamError", "RatesUnavailableError"], uncached._tag)
      }).pipe(Effect.provide(Rates.layerTest({ env: fastEnv(emulator.url), copies: cache.layer })))
    })
  }

  it.live("without any latest price, answers from the series (last close as price), marked stale", () =>
    Effect.gen(function*() {
      emulator.setFault({ mode: "5xx", paths: ["/coins/markets"] })
      const result = yield* historical({ symbols: ["BTC"], days: 30 })
      const closes = emulatedDailyPrices("bitcoin", "usd", 30, EMULATOR_NOW).slice(0, 30)
      const lastClose = closes.at(-1)!
      assert.strictEqual(result.stale, true)
      assert.strictEqual(result.rates[0]!.price, lastClose[1])
      const weekAgo = closes.at(-8)![1]
      assert.closeTo(result.rates[0]!.change["7d"]!, ((lastClose[1] - weekAgo) / weekAgo) * 100, 1e-9)
      assert.strictEqual(result.asOf, new Date(lastClose[0]).toISOString().replace(".000", ""))
    }).pipe(Effect.provide(liveRates(fastEnv(emulator.url)))))
})
