/** Coinbase's configuration (CONTRACT C2): its defaults, `none`, and every bad variable named at start-up. */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { validateConfiguration } from "../../../../src/checkConfiguration.ts"
import { readCoinbaseConfig } from "../../../../src/rates/coinbase/CoinbaseConfig.ts"
import { configFrom, type Env } from "../../../support/config.ts"

const read = (env: Env) => readCoinbaseConfig.pipe(Effect.provide(configFrom(env)))

describe("CoinbaseConfig", () => {
  it.effect("defaults: Coinbase Exchange's public host, used as the fallback, 10 calls a second", () =>
    Effect.gen(function*() {
      const config = yield* read({})
      assert.strictEqual(config.baseUrl, "https://api.exchange.coinbase.com")
      assert.strictEqual(config.fallback, "coinbase")
      assert.strictEqual(config.callsPerSecond, 10)
      assert.strictEqual(config.feedUrl, "wss://ws-feed.exchange.coinbase.com")
    }))

  it.effect("the live feed: another ws(s) URL, or none", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* read({ COINBASE_WS_URL: "ws://127.0.0.1:4102/ws-feed" })).feedUrl, "ws://127.0.0.1:4102/ws-feed")
      assert.strictEqual((yield* read({ COINBASE_WS_URL: "none" })).feedUrl, undefined)
      const error = yield* Effect.flip(read({ COINBASE_WS_URL: "https://ws-feed.exchange.coinbase.com" }))
      assert.deepStrictEqual(error.problems, ["COINBASE_WS_URL: expected an absolute ws(s) URL or none, got \"https://ws-feed.exchange.coinbase.com\""])
    }))

  it.effect("reads another host (trailing slash dropped) and `none`", () =>
    Effect.gen(function*() {
      const config = yield* read({ COINBASE_BASE_URL: "http://127.0.0.1:4102/", RATES_FALLBACK: "none" })
      assert.strictEqual(config.baseUrl, "http://127.0.0.1:4102")
      assert.strictEqual(config.fallback, "none")
    }))

  it.effect("names both bad variables, with what they accept and what they got", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(read({ COINBASE_BASE_URL: "ftp://example.com", RATES_FALLBACK: "kraken" }))
      assert.deepStrictEqual(error.problems, [
        "COINBASE_BASE_URL: expected an absolute http(s) URL, got \"ftp://example.com\"",
        "RATES_FALLBACK: expected one of coinbase, none, got \"kraken\""
      ])
    }))

  it.effect("the start-up check reports them with the other groups' problems", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(validateConfiguration.pipe(Effect.provide(configFrom({ PORT: "abc", RATES_FALLBACK: "yes" }))))
      assert.isTrue(error.problems.some((line) => line.startsWith("PORT:")))
      assert.isTrue(error.problems.some((line) => line.startsWith("RATES_FALLBACK:")))
    }))
})
