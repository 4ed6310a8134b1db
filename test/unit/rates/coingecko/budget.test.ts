/**
 * What a CoinGecko call costs and who pays it (credits/MonthlyBudget.ts makeBudget, CoinGeckoClient.ts), with a stand-in HttpClient
 * that counts calls: a caller's share, the cold pool kept apart from refreshes, retries charged to no
 * one's share, one failure per request in the breaker, the lists outside the breaker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"
import { CircuitBreaker, RateLimiter } from "effect/persistence"
import { configFrom, type Env } from "../../../support/config.ts"
import { CoinGeckoClient } from "../../../../src/rates/coingecko/CoinGeckoClient.ts"
import { CoinGeckoConfig } from "../../../../src/rates/coingecko/CoinGeckoConfig.ts"
import { Charge, spendingUntil } from "../../../../src/rates/upstream.ts"
import { layerGuardStoresMemory } from "../../../../src/rates/upstreamCall.ts"
import { MonthlyBudget } from "../../../../src/rates/coingecko/credits/MonthlyBudget.ts"
import { limiterOrShare } from "../../../../src/rates/redisDown.ts"

/** A budget store (Redis) that does not answer: every bucket fails with a store error; on a host of four workers. */
const storeDown = Layer.mergeAll(
  Layer.effect(RateLimiter.RateLimiter, limiterOrShare({
    [RateLimiter.TypeId]: RateLimiter.TypeId,
    consume: () => Effect.fail(new RateLimiter.RateLimiterError({ reason: new RateLimiter.RateLimitStoreError({ message: "connection refused" }) })),
    adaptiveConsume: () => Effect.die("unused"),
    adaptiveFeedback: () => Effect.die("unused")
  }, { current: () => 4 })),
  CircuitBreaker.layerStoreMemory()
)

/** A client whose upstream answers `status` (a chart when 200), counting calls. */
const clientWith = (env: Env, answer: () => number = () => 200, guards: Layer.Layer<RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore> = layerGuardStoresMemory) => {
  const counter = { calls: 0 }
  const http = HttpClient.make((request) =>
    Effect.sync(() => {
      counter.calls++
      const status = answer()
      const body = status === 200 ? (request.url.endsWith("supported_vs_currencies") ? ["usd"] : { prices: [[1, 2]] }) : { status: { error_code: status } }
      return HttpClientResponse.fromWeb(request, new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } }))
    }))
  const layer = CoinGeckoClient.layerNoDeps.pipe(
    Layer.provide(Layer.mergeAll(
      CoinGeckoConfig.layer.pipe(Layer.provide(configFrom({ COINGECKO_BASE_URL: "http://upstream.test/api/v3", COINGECKO_RETRY_BASE_MS: "1", ...env }))),
      guards,
      // Credits out of the way: these tests are about the minute's budget, faults and the breaker.
      MonthlyBudget.layerMemory(1_000_000_000),
      Layer.succeed(HttpClient.HttpClient)(http)
    ))
  )
  return { layer, counter }
}

const chart = (caller: string) =>
  Effect.gen(function*() {
    const client = yield* CoinGeckoClient
    return yield* client.marketChartRange("bitcoin", "usd", 1_795_305_600, 1_795_392_000).pipe(spendingUntil(Number.POSITIVE_INFINITY, caller === "background" ? Charge.background : Charge.request(caller)))
  })

const kindOf = <A, R>(effect: Effect.Effect<A, { readonly kind: string }, R>) =>
  Effect.map(Effect.result(effect), (result) => (result._tag === "Success" ? "ok" : result.failure.kind))

describe("upstream budget", () => {
  it.live("one caller gets its share per minute; its excess is its own, and never spends a shared token", () => {
    const { counter, layer } = clientWith({ COINGECKO_CALLS_PER_MIN: "10", COINGECKO_CALLER_SHARE_PCT: "30", COINGECKO_REFRESH_RESERVE_PCT: "20" })
    return Effect.gen(function*() {
      const greedy = yield* Effect.forEach(Array.from({ length: 6 }), () => kindOf(chart("ip:198.51.100.1")))
      assert.deepStrictEqual(greedy, ["ok", "ok", "ok", "rate-limited", "rate-limited", "rate-limited"])
      assert.strictEqual(counter.calls, 3)
      // The cold pool (10 - 2) still has 5 tokens for others; then the reserve is for refreshes only.
      const others = yield* Effect.forEach(["a", "b", "c", "d", "e", "f"], (who) => kindOf(chart(`ip:${who}`)))
      assert.deepStrictEqual(others, ["ok", "ok", "ok", "ok", "ok", "rate-limited"])
      assert.deepStrictEqual(yield* Effect.forEach([1, 2], () => kindOf(chart("background"))), ["ok", "ok"])
      assert.strictEqual(yield* kindOf(chart("background")), "rate-limited", "the whole budget is spent")
    }).pipe(Effect.provide(layer))
  })

  it.live("retries spend the shared budget, not the caller's share", () => {
    let n = 0
    const { counter, layer } = clientWith({ COINGECKO_CALLER_SHARE_PCT: "7", COINGECKO_RETRIES: "2", COINGECKO_BREAKER_FAILURES: "100" }, () =>
      n++ % 3 === 2 ? 200 : 503)
    return Effect.gen(function*() {
      assert.strictEqual(yield* kindOf(chart("ip:198.51.100.1")), "ok") // 503, 503, 200
      assert.strictEqual(yield* kindOf(chart("ip:198.51.100.1")), "ok") // again
      assert.strictEqual(counter.calls, 6)
      assert.strictEqual(yield* kindOf(chart("ip:198.51.100.1")), "rate-limited")
    }).pipe(Effect.provide(layer))
  })
})

describe("the minute's budget while its store (Redis) fails (issue 27, finding 1)", () => {
  it.live("holds in this process, its share of each bucket: never calls without a budget", () => {
    // 30 a minute, four workers: 7 whole-budget calls a minute for this one, of which the cold pool's 6.
    const { counter, layer } = clientWith({ COINGECKO_CALLS_PER_MIN: "30", WEB_CONCURRENCY: "4", COINGECKO_CALLER_SHARE_PCT: "100" }, () => 200, storeDown)
    return Effect.gen(function*() {
      const cold = yield* Effect.forEach(Array.from({ length: 10 }), (_, i) => kindOf(chart(`ip:198.51.100.${i}`)))
      assert.deepStrictEqual(cold, [...Array(6).fill("ok"), ...Array(4).fill("rate-limited")])
      const background = yield* Effect.forEach(Array.from({ length: 3 }), () => kindOf(chart("background")))
      assert.deepStrictEqual(background, ["ok", "rate-limited", "rate-limited"])
      assert.strictEqual(counter.calls, 7)
    }).pipe(Effect.provide(layer))
  })
})

describe("circuit breaker", () => {
  it.live("one request's failing calls count once; each request counts", () => {
    const { counter, layer } = clientWith({ COINGECKO_RETRIES: "1", COINGECKO_BREAKER_FAILURES: "3" }, () => 503)
    return Effect.gen(function*() {
      const client = yield* CoinGeckoClient
      // One request, four coins, each retried: one failure in the breaker.
      const request = Effect.suspend(() => {
        const charge = Charge.request("ip:198.51.100.1")
        return Effect.forEach(["bitcoin", "ethereum", "solana", "ripple"], (id) => kindOf(client.marketChartRange(id, "usd", 1_795_305_600, 1_795_392_000).pipe(spendingUntil(Number.POSITIVE_INFINITY, charge))))
      })
      assert.deepStrictEqual(yield* request, ["transient", "transient", "transient", "transient"])
      assert.deepStrictEqual(yield* request, ["transient", "transient", "transient", "transient"])
      assert.strictEqual(counter.calls, 16)
      // The third request's first failure opens the circuit: the rest of it is refused without a call.
      assert.deepStrictEqual(yield* request, ["transient", "circuit-open", "circuit-open", "circuit-open"])
      assert.strictEqual(counter.calls, 18)
    }).pipe(Effect.provide(layer))
  })

  it.live("the lists never open it, and are not retried", () => {
    const { counter, layer } = clientWith({ COINGECKO_RETRIES: "2", COINGECKO_BREAKER_FAILURES: "2" }, () => 503)
    return Effect.gen(function*() {
      const client = yield* CoinGeckoClient
      for (let i = 0; i < 5; i++) assert.strictEqual(yield* kindOf(client.supportedCurrencies), "transient")
      assert.strictEqual(counter.calls, 5)
      assert.strictEqual(yield* kindOf(chart("ip:198.51.100.1")), "transient", "a data call still reaches the upstream")
      assert.strictEqual(counter.calls, 8)
    }).pipe(Effect.provide(layer))
  })
})
