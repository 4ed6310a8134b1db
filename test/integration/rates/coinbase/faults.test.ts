/**
 * The Coinbase client while the emulated Coinbase misbehaves or is pressed: each fault is its typed
 * error (retried only when transient), a slow Coinbase times out within the attempt timeout, the
 * breaker opens after repeated failures, a failing product list neither opens it nor loses its last
 * good copy, nor does a suspect one (empty, or without most majors), and a burst of calls stays inside
 * Coinbase's public limit of 10 a second.
 */
import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { Context, Duration, Effect, Layer, Logger } from "effect"
import type { Redis } from "effect/persistence"
import { CoinbaseClient, type CoinbaseClientShape } from "../../../../src/rates/coinbase/CoinbaseClient.ts"
import { layerGuardStoresRedis } from "../../../../src/rates/redisDown.ts"
import { ProcessCount } from "../../../../src/platform/processCount/ProcessCount.ts"
import * as ProcessCountRedis from "../../../../src/platform/processCount/redis.ts"
import { refusingRedis, refusingWhile } from "../../../support/redis.ts"
import type { SourceError } from "../../../../src/rates/upstream.ts"
import { CoinbaseConfig } from "../../../../src/rates/coinbase/CoinbaseConfig.ts"
import { configFrom } from "../../../support/config.ts"
import { type CoinbaseEmulator, type CoinbaseFaultMode, startCoinbaseEmulator } from "../../../emulators/coinbase.ts"
import { coinbasePrice, DAY_MS, emulatedProducts, startOfUtcDay } from "../../../emulators/coinbase-data.ts"
import { coinbaseClient, fastGuards, products } from "../../../support/coinbase.ts"
import { timed } from "../../../support/ownTime.ts"
import { EMULATOR_NOW } from "../../../support/rates.ts"
import { upstreamHttp } from "../../../support/upstream.ts"
import { spendingUntil } from "../../../../src/rates/upstream.ts"

let emulator: CoinbaseEmulator
const TODAY = startOfUtcDay(EMULATOR_NOW)
const SLOW_PRODUCT = "/products/ETH-USD"

beforeAll(async () => {
  emulator = await startCoinbaseEmulator({ now: EMULATOR_NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.setLatency(SLOW_PRODUCT, 0)
  emulator.setRateLimit(true)
  emulator.setListed(undefined)
  emulator.resetStats()
})

const calls = (path: string) => emulator.stats().byPath[path] ?? 0

interface FaultCase {
  readonly mode: CoinbaseFaultMode
  readonly kind: string
  /** Calls that reached Coinbase: 2 when retried once, 1 when not. */
  readonly upstreamCalls: number
}

const faultCases: ReadonlyArray<FaultCase> = [
  { mode: "5xx", kind: "transient", upstreamCalls: 2 },
  { mode: "hang", kind: "transient", upstreamCalls: 2 },
  { mode: "reset", kind: "transient", upstreamCalls: 2 },
  { mode: "truncated", kind: "invalid-response", upstreamCalls: 1 },
  { mode: "wrong-shape", kind: "invalid-response", upstreamCalls: 1 },
  { mode: "429", kind: "rate-limited", upstreamCalls: 1 }
]

describe("each Coinbase fault is its typed error, fast", () => {
  for (const { kind, mode, upstreamCalls } of faultCases) {
    for (const call of ["candles", "ticker", "stats"] as const) {
      it.live(`${mode} on ${call} → ${kind}`, () =>
        Effect.gen(function*() {
          const client = yield* CoinbaseClient
          emulator.setFault({ mode, paths: ["/products/BTC-USD/"] })
          const { ownMs, result } = yield* timed(
            Effect.asVoid<unknown, SourceError, never>(
              call === "candles"
                ? client.dailyCandles("BTC-USD", TODAY - 6 * DAY_MS, TODAY)
                : call === "ticker"
                ? client.ticker("BTC-USD")
                : client.stats("BTC-USD")
            )
          )
          assert.strictEqual(result._tag, "Failure")
          if (result._tag === "Failure") {
            assert.strictEqual(result.failure._tag, "SourceError")
            assert.strictEqual(result.failure.kind, kind, result.failure.message)
            if (kind === "rate-limited") assert.strictEqual(result.failure.retryAfterSeconds, 2)
          }
          assert.strictEqual(calls(`/products/BTC-USD/${call}`), upstreamCalls)
          assert.isBelow(ownMs, 1_500)
        }).pipe(Effect.provide(coinbaseClient(emulator.url, fastGuards))))
    }
  }

  it.live("after a 429 nobody calls Coinbase until the cool-down has passed", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      emulator.setFault({ mode: "429", times: 1, paths: ["/products/BTC-USD/"] })
      assert.strictEqual((yield* Effect.flip(client.ticker("BTC-USD"))).kind, "rate-limited")
      const held = yield* Effect.flip(client.ticker("ETH-USD"))
      assert.deepInclude(held, { kind: "rate-limited" })
      assert.include(held.detail, "cooling down")
      assert.strictEqual(calls("/products/ETH-USD/ticker"), 0)
      yield* Effect.sleep("2100 millis")
      assert.strictEqual((yield* client.ticker("ETH-USD")).price, coinbasePrice("ETH-USD", EMULATOR_NOW))
    }).pipe(Effect.provide(coinbaseClient(emulator.url, fastGuards))))

  it.live("a slow Coinbase (5 s) is a timeout within the attempt timeout", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      emulator.setLatency(SLOW_PRODUCT, 5_000)
      const { elapsedMs, ownMs, result } = yield* timed(client.stats("ETH-USD"))
      assert.strictEqual(result._tag, "Failure")
      if (result._tag === "Failure") {
        assert.strictEqual(result.failure.kind, "transient")
        assert.include(result.failure.detail, "no answer within 800 ms")
      }
      assert.isAtLeast(elapsedMs, 790)
      assert.isBelow(ownMs, 1_500)
    }).pipe(Effect.provide(coinbaseClient(emulator.url, { ...fastGuards, attemptTimeoutMs: 800, retries: 0 }))))

  it.live("the breaker opens after repeated failures: then no call reaches Coinbase, for any product", () =>
    Effect.gen(function*() {
      const client = yield* CoinbaseClient
      emulator.setFault({ mode: "5xx", paths: ["/products/"] })
      for (let i = 0; i < 3; i++) assert.strictEqual((yield* Effect.flip(client.ticker("BTC-USD"))).kind, "transient")
      assert.strictEqual(calls("/products/BTC-USD/ticker"), 3)
      for (const product of ["BTC-USD", "ETH-EUR"]) {
        const refused = yield* Effect.flip(client.stats(product))
        assert.strictEqual(refused.kind, "circuit-open")
        assert.isAtLeast(refused.retryAfterSeconds, 9)
        assert.isAtMost(refused.retryAfterSeconds, 10)
      }
      assert.strictEqual(emulator.stats().total, 3 + (calls("/products")), "only the three failed calls and the list")
    }).pipe(Effect.provide(coinbaseClient(emulator.url, { ...fastGuards, retries: 0, breakerFailures: 3, breakerOpenMs: 10_000 }))))
})

describe("the product list", () => {
  const soon = () => Date.now() + 300
  it.live("failing to load: `unavailable` with a Retry-After, data calls unaffected (not in the breaker), then loaded when due", () =>
    Effect.gen(function*() {
      emulator.setFault({ mode: "5xx", paths: ["/products$"] })
      const client = yield* CoinbaseClient
      const list = yield* products
      for (let i = 0; i < 3; i++) {
        const error = yield* Effect.flip(list.productFor("BTC", "USD").pipe(spendingUntil(soon())))
        assert.deepInclude(error, { kind: "unavailable", retryAfterSeconds: 1 })
      }
      assert.strictEqual(calls("/products"), 1, "failures remembered: no second try before the back-off")
      assert.strictEqual((yield* client.ticker("BTC-USD")).price, coinbasePrice("BTC-USD", EMULATOR_NOW))
      emulator.setFault("none")
      yield* Effect.sleep("450 millis")
      assert.deepStrictEqual(yield* list.productFor("BTC", "USD").pipe(spendingUntil(soon())), { id: "BTC-USD", base: "BTC", quote: "USD" })
      assert.strictEqual(calls("/products"), 2)
    }).pipe(Effect.provide(coinbaseClient(emulator.url, { ...fastGuards, breakerFailures: 1, productsRetryMs: 400 })), Effect.scoped))

  it.live("a failed reload keeps the last good copy", () =>
    Effect.gen(function*() {
      const list = yield* products
      const first = yield* list.productFor("BTC", "USD").pipe(spendingUntil(soon()))
      emulator.setFault({ mode: "5xx", paths: ["/products$"] })
      yield* Effect.sleep("350 millis")
      assert.strictEqual(yield* list.productFor("BTC", "USD").pipe(spendingUntil(soon())), first, "served while the reload runs")
      yield* Effect.sleep("100 millis")
      assert.strictEqual(yield* list.productFor("BTC", "USD").pipe(spendingUntil(soon())), first, "kept after the reload failed")
      assert.strictEqual(calls("/products"), 2)
      assert.strictEqual(emulator.stats().byStatus["503"], 1)
    }).pipe(Effect.provide(coinbaseClient(emulator.url, { ...fastGuards, productsRefreshMs: 300 })), Effect.scoped))
})

describe("a product list Coinbase answers that is not to be trusted", () => {
  const soon = () => Date.now() + 300
  const BTC_USD = { id: "BTC-USD", base: "BTC", quote: "USD" }
  /** Collects the warnings logged, those of background reloads included. */
  const warningsInto = (warnings: Array<string>) =>
    Logger.layer([Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn") warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
    })])

  it.live("an empty list, or one without most majors, keeps the last good list: one warning each, the next reload backs off", () => {
    const warnings: Array<string> = []
    return Effect.gen(function*() {
      const list = yield* products
      assert.deepStrictEqual(yield* list.productFor("BTC", "USD").pipe(spendingUntil(soon())), BTC_USD)
      // Reloaded on its schedule: every second, and after failures in a row 1 s, then 2 s later.
      const loaded = Date.now()
      const until = (ms: number) => Effect.sleep(Duration.millis(Math.max(0, loaded + ms - Date.now())))
      emulator.setListed([])
      yield* until(1_500)
      assert.strictEqual(calls("/products"), 2)
      assert.deepStrictEqual(yield* list.productFor("BTC", "USD").pipe(spendingUntil(soon())), BTC_USD, "an empty list replaced the list held")
      for (let i = 0; i < 5; i++) yield* list.productFor("ETH", "EUR").pipe(spendingUntil(soon()))
      assert.strictEqual(calls("/products"), 2, "reads ask nothing; the next reload waits, as after a failure")
      assert.strictEqual(warnings.length, 1, warnings.join("\n"))
      assert.match(warnings[0]!, /Coinbase product list.*serving the last good copy.*an empty product list/)

      // 38 of the 43 majors (curated coins in USD or EUR) gone at once: a fault, not delistings.
      const majorsKept = new Set(["BTC-USD", "ETH-USD", "ETH-EUR", "USDT-USD", "USDT-EUR"])
      emulator.setListed(emulatedProducts.map((p) => p.id).filter((id) => majorsKept.has(id) || !/-(USD|EUR)$/.test(id)))
      yield* until(2_500)
      assert.strictEqual(calls("/products"), 3)
      assert.deepStrictEqual(yield* list.productFor("SOL", "EUR").pipe(spendingUntil(soon())), { id: "SOL-EUR", base: "SOL", quote: "EUR" })
      assert.strictEqual(warnings.length, 2, warnings.join("\n"))
      assert.match(warnings[1]!, /lost 38 of the 43 major pairs/)

      // A few delistings are Coinbase's word: taken, after the back-off of the second failure (2 s).
      emulator.setListed(emulatedProducts.map((p) => p.id).filter((id) => id !== "SOL-EUR" && id !== "LTC-USD"))
      yield* until(3_500)
      assert.strictEqual(calls("/products"), 3, "the back-off doubled")
      yield* until(4_500)
      assert.strictEqual(calls("/products"), 4)
      assert.isUndefined(yield* list.productFor("SOL", "EUR").pipe(spendingUntil(soon())))
      assert.deepStrictEqual(yield* list.productFor("BTC", "USD").pipe(spendingUntil(soon())), BTC_USD)
      assert.strictEqual(warnings.length, 2)
    }).pipe(
      Effect.provide(Layer.merge(coinbaseClient(emulator.url, { ...fastGuards, productsRefreshMs: 1_000, productsRetryMs: 1_000 }), warningsInto(warnings))),
      Effect.scoped
    )
  })

  it.live("an empty first list is no list: `unavailable` with a Retry-After, then the list once Coinbase lists again", () =>
    Effect.gen(function*() {
      emulator.setListed([])
      const list = yield* products
      const first = yield* Effect.result(list.productFor("BTC", "USD").pipe(spendingUntil(soon())))
      assert.strictEqual(first._tag === "Failure" ? first.failure.kind : `a product: ${JSON.stringify(first.success)}`, "unavailable")
      emulator.setListed(undefined)
      yield* Effect.sleep("450 millis")
      assert.deepStrictEqual(yield* list.productFor("BTC", "USD").pipe(spendingUntil(soon())), BTC_USD)
      assert.strictEqual(calls("/products"), 2)
    }).pipe(Effect.provide(coinbaseClient(emulator.url, { ...fastGuards, productsRetryMs: 400 })), Effect.scoped))
})

describe("Coinbase's public limit (10 requests/s per address, bursts to 15)", () => {
  const fortyProducts = emulatedProducts.filter((p) => p.quote === "USD" || p.quote === "EUR").map((p) => p.id).slice(0, 40)
  const burst = Effect.gen(function*() {
    const client = yield* CoinbaseClient
    yield* client.products
    emulator.resetStats()
    return yield* timed(Effect.forEach(fortyProducts, (id) => client.dailyCandles(id, TODAY - 29 * DAY_MS, TODAY), { concurrency: "unbounded" }))
  })

  it.live("a burst of 40 concurrent candle calls is spaced to the limit: no 429", () =>
    Effect.gen(function*() {
      assert.strictEqual(new Set(fortyProducts).size, 40)
      const { elapsedMs, result } = yield* burst
      assert.strictEqual(result._tag, "Success", result._tag === "Failure" ? result.failure.message : "")
      const stats = emulator.stats()
      assert.strictEqual(stats.total, 40)
      assert.deepStrictEqual(stats.byStatus, { "200": 40 })
      // A full bucket of 10, then one every 100 ms.
      assert.isAtLeast(elapsedMs, 2_800)
    }).pipe(Effect.provide(coinbaseClient(emulator.url))))

  it.live("the same burst without our bucket would be refused (the check above can fail)", () =>
    Effect.gen(function*() {
      yield* burst
      assert.isAbove(emulator.stats().byStatus["429"] ?? 0, 0)
    }).pipe(Effect.provide(coinbaseClient(emulator.url, { callsPerSecond: 1_000, maxConcurrency: 40, retries: 0 }))))
})

describe("Coinbase's public limit across instances (REDIS_URL)", () => {
  const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
  const fortyProducts = emulatedProducts.filter((p) => p.quote === "USD" || p.quote === "EUR").map((p) => p.id).slice(0, 40)
  /** One instance behind the same address: its own client, the bucket and breaker in `redis` (one of `workers` on its host). */
  const instance = (keyPrefix: string, redis: Layer.Layer<Redis.Redis, unknown> = NodeRedis.layer({ url: redisUrl }), workers = 1) =>
    Layer.build(CoinbaseClient.layerNoDeps.pipe(
      Layer.provide(layerGuardStoresRedis({ prefix: keyPrefix })),
      // Marked present every 200 ms (10 s in service): the test need not wait for the instances to see each other.
      Layer.provideMerge(ProcessCountRedis.layerRedis({ prefix: keyPrefix, workers, markMs: 200 })),
      Layer.provide(CoinbaseConfig.layerWith({}).pipe(Layer.provide(configFrom({ COINBASE_BASE_URL: emulator.url })))),
      Layer.provide(Layer.merge(upstreamHttp, redis))
    ))
  /** Forty candle calls at once, shared by two instances, once the address's burst of 15 is back in full. */
  const burstAcross = (clients: ReadonlyArray<CoinbaseClientShape>) =>
    Effect.gen(function*() {
      yield* Effect.sleep("1500 millis")
      emulator.resetStats()
      const { elapsedMs, result } = yield* timed(Effect.forEach(
        fortyProducts,
        (id, i) => clients[i % 2]!.dailyCandles(id, TODAY - 29 * DAY_MS, TODAY),
        { concurrency: "unbounded" }
      ))
      assert.strictEqual(result._tag, "Success", result._tag === "Failure" ? result.failure.message : "")
      assert.deepStrictEqual(emulator.stats().byStatus, { "200": 40 })
      return elapsedMs
    })

  it.live("two instances bursting together share one bucket of 10 a second: no 429", () =>
    Effect.gen(function*() {
      const keyPrefix = `test-coinbase-${randomUUID()}:`
      const [a, b] = yield* Effect.all([instance(keyPrefix), instance(keyPrefix)])
      const clients = [Context.get(a!, CoinbaseClient), Context.get(b!, CoinbaseClient)]
      // The product lists first, without the emulator's limit (the test before may have spent its burst).
      emulator.setRateLimit(false)
      yield* clients[0]!.products
      yield* clients[1]!.products
      emulator.setRateLimit(true)
      // One bucket of 10 for both, then one every 100 ms; two buckets would take half as long.
      assert.isAtLeast(yield* burstAcross(clients), 2_800)
    }).pipe(Effect.scoped))

  it.live("with Redis down, each of two workers on one host keeps its share of the bucket (5 a second): no 429, never called without it", () =>
    Effect.gen(function*() {
      const [a, b] = yield* Effect.all([instance("down:", refusingRedis, 2), instance("down:", refusingRedis, 2)])
      // Two buckets of 5: 5 each at once, then one each every 200 ms.
      assert.isAtLeast(yield* burstAcross([Context.get(a!, CoinbaseClient), Context.get(b!, CoinbaseClient)]), 2_800)
    }).pipe(Effect.scoped))

  it.live("with Redis down, two hosts of one worker each that saw each other in Redis keep half the bucket each: no 429", () =>
    Effect.gen(function*() {
      const keyPrefix = `test-coinbase-${randomUUID()}:`
      const outage = { on: false }
      const [a, b] = yield* Effect.all([instance(keyPrefix, refusingWhile(outage)), instance(keyPrefix, refusingWhile(outage))])
      // Until each has seen the other in Redis (marks every 200 ms; a busy machine may take longer than three).
      const seen = () => [a!, b!].every((built) => Context.get(built, ProcessCount).current() === 2)
      for (let waited = 0; !seen(); waited += 20) {
        if (waited > 10_000) assert.fail("the two instances did not see each other in Redis within 10 s")
        yield* Effect.sleep("20 millis")
      }
      outage.on = true
      // Each counted the whole bucket alone before: 20 calls at once, Coinbase's 10 a second passed (429s).
      assert.isAtLeast(yield* burstAcross([Context.get(a!, CoinbaseClient), Context.get(b!, CoinbaseClient)]), 2_800)
    }).pipe(Effect.scoped))
})

