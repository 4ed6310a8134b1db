import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { readCoinGeckoConfig } from "../../../../src/rates/coingecko/CoinGeckoConfig.ts"
import { configFrom, type Env } from "../../../support/config.ts"

const read = (env: Env) => readCoinGeckoConfig.pipe(Effect.provide(configFrom(env)))

describe("CoinGeckoConfig", () => {
  it.effect("defaults: CoinGecko demo host, 30 calls/min, a request budget under 10 s", () =>
    Effect.gen(function*() {
      const config = yield* read({})
      assert.strictEqual(config.baseUrl, "https://api.coingecko.com/api/v3")
      assert.strictEqual(config.apiPlan, "demo")
      assert.strictEqual(config.apiKey, undefined)
      assert.strictEqual(config.callsPerMinute, 30)
      assert.isBelow(config.requestBudgetMs, 10_000)
    }))

  it.effect("the budget's shares: a third per caller, a fifth kept for refreshes, as percentages of it", () =>
    Effect.gen(function*() {
      const defaults = yield* read({})
      assert.strictEqual(defaults.callerCallsPerMinute, 10)
      assert.strictEqual(defaults.refreshReservePerMinute, 6)
      assert.strictEqual(defaults.cacheMaxMegabytes, 16)
      assert.strictEqual(defaults.auxiliaryRetryMs, 10_000)
      assert.strictEqual(defaults.indexRankPages, 4)
      const pro = yield* read({ COINGECKO_CALLS_PER_MIN: "500", COINGECKO_CALLER_SHARE_PCT: "5", COINGECKO_REFRESH_RESERVE_PCT: "0" })
      assert.strictEqual(pro.callerCallsPerMinute, 25)
      assert.strictEqual(pro.refreshReservePerMinute, 0)
      assert.strictEqual((yield* read({ COINGECKO_CALLS_PER_MIN: "2", COINGECKO_CALLER_SHARE_PCT: "1" })).callerCallsPerMinute, 1)
      const error = yield* Effect.flip(read({ COINGECKO_CALLER_SHARE_PCT: "0", COINGECKO_REFRESH_RESERVE_PCT: "95" }))
      assert.include(error.message, "COINGECKO_CALLER_SHARE_PCT")
      assert.include(error.message, "COINGECKO_REFRESH_RESERVE_PCT")
    }))

  it.effect("the pro plan defaults to the pro host and needs a key, which stays redacted", () =>
    Effect.gen(function*() {
      const config = yield* read({ COINGECKO_API_PLAN: "pro", COINGECKO_API_KEY: "secret-1" })
      assert.strictEqual(config.baseUrl, "https://pro-api.coingecko.com/api/v3")
      assert.strictEqual(Redacted.value(config.apiKey!), "secret-1")
      assert.notInclude(JSON.stringify(config), "secret-1")
      const error = yield* Effect.flip(read({ COINGECKO_API_PLAN: "pro" }))
      assert.include(error.message, "COINGECKO_API_KEY")
    }))

  it.effect("the month's credits: Demo's 10,000 by default, Basic's 100,000 with a paid key, or as set", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* read({})).callsPerMonth, 10_000)
      assert.strictEqual((yield* read({ COINGECKO_API_PLAN: "pro", COINGECKO_API_KEY: "k" })).callsPerMonth, 100_000)
      assert.strictEqual((yield* read({ COINGECKO_CALLS_PER_MONTH: "500000" })).callsPerMonth, 500_000)
      for (const bad of ["0", "999", "ten thousand", "12.5"]) {
        const error = yield* Effect.flip(read({ COINGECKO_CALLS_PER_MONTH: bad }))
        assert.include(error.message, "COINGECKO_CALLS_PER_MONTH")
      }
    }))

  it.effect("names every bad variable", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(read({
        COINGECKO_API_PLAN: "enterprise",
        COINGECKO_TIMEOUT_MS: "fast",
        COINGECKO_CALLS_PER_MIN: "0",
        COINGECKO_BASE_URL: "ftp://example.com"
      }))
      for (const name of ["COINGECKO_API_PLAN", "COINGECKO_TIMEOUT_MS", "COINGECKO_CALLS_PER_MIN", "COINGECKO_BASE_URL"]) {
        assert.include(error.message, name)
      }
    }))
})
