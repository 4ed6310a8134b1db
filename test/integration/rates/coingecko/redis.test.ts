/**
 * Several instances sharing state through a real Redis (REDIS_URL deployments): one instance's
 * upstream fetch serves the others, and the calls-per-minute budget is one budget for all.
 *
 * Uses a private `redis-server` when one is installed, else the Redis at REDIS_URL (keys under a
 * per-test prefix, nothing flushed); skipped only when neither exists.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { createServer } from "node:net"
import { NodeRedis } from "@effect/platform-node"
import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { type Context, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../../emulators/coingecko.ts"
import { configFrom, type Env } from "../../../support/config.ts"
import { RatesProvider, type RatesQuery } from "../../../../src/rates/RatesProvider.ts"
import { coinGeckoAloneRedis, EMULATOR_NOW, healthyEnv } from "../../../support/rates.ts"
import { planFor } from "../../../../src/rates/coingecko/credits/monthlyCredits.ts"
import { PRICES_SHARE } from "../../../../src/rates/coingecko/latestPrices.ts"
import { layerRedis as layerSharedCell } from "../../../../src/platform/durableCell/redis.ts"
import { DailyHistory } from "../../../../src/rates/history/DailyHistory.ts"
import { upstreamHttp } from "../../../support/upstream.ts"
import { refusingRedis } from "../../../support/redis.ts"

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
    probe.once("error", reject)
  })

const canSpawnRedis = spawnSync("redis-server", ["--version"]).status === 0
const sharedRedisUrl = process.env.REDIS_URL
let redisProcess: ChildProcess | undefined
let redisUrl: string
let emulator: CoinGeckoEmulator

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ now: EMULATOR_NOW })
  if (!canSpawnRedis) {
    redisUrl = sharedRedisUrl ?? ""
    return
  }
  const port = await freePort()
  const server = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
  redisProcess = server
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.stdout.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("Ready to accept connections")) resolve()
    })
  })
  redisUrl = `redis://127.0.0.1:${port}`
})
afterAll(async () => {
  await emulator?.close()
  redisProcess?.kill()
})
beforeEach(() => emulator.resetStats())

/** One "instance": its own provider, HTTP client and Redis connection; `keyPrefix` isolates a test's keys. */
const instance = (env: Env, keyPrefix: string) =>
  coinGeckoAloneRedis(keyPrefix).pipe(Layer.provide(configFrom(env)),
    // The month's credits are shared through the same Redis, as in production.
    Layer.provide(layerSharedCell(keyPrefix)),
    Layer.provideMerge(NodeRedis.layer({ url: redisUrl })),
    Layer.provide(Layer.merge(upstreamHttp, DailyHistory.layerMemory))
  )

/** Removes a test's keys when it ends, in case this is a shared Redis (REDIS_URL). */
const removeKeysOnExit = (context: Context.Context<Redis.Redis>, keyPrefix: string) =>
  Effect.addFinalizer(() =>
    Effect.service(Redis.Redis).pipe(
      Effect.flatMap((redis) =>
        Effect.flatMap(redis.send<Array<string>>("KEYS", `${keyPrefix}*`), (keys) =>
          keys.length === 0 ? Effect.void : Effect.asVoid(redis.send("DEL", ...keys)))),
      Effect.provide(context),
      Effect.ignore
    ))

const askVia = (context: Context.Context<RatesProvider>, query: RatesQuery) =>
  Effect.flatMap(Effect.service(RatesProvider), (rates) => Effect.map(rates.historical(query), ({ result }) => result)).pipe(
    Effect.provide(context)
  )

describe.skipIf(!canSpawnRedis && sharedRedisUrl === undefined)("CoinGecko provider with Redis-shared state", () => {
  it.live("a second instance answers from what the first one fetched, lists included, without calling the upstream", () =>
    Effect.gen(function*() {
      const env = healthyEnv(emulator.url)
      const keyPrefix = `test-${randomUUID()}:`
      const first = yield* Layer.build(instance(env, keyPrefix))
      yield* removeKeysOnExit(first, keyPrefix)

      const query = { symbols: ["BTC", "HOT"], currency: "usd", days: 30 }
      const fromFirst = yield* askVia(first, query)
      const firstCalls = emulator.stats().total
      assert.isAtLeast(firstCalls, 3)
      // Started now: it adopts the currency list and the coin index the first one stored.
      const second = yield* Layer.build(instance(env, keyPrefix))
      const fromSecond = yield* askVia(second, query)
      assert.strictEqual(emulator.stats().total, firstCalls, "no upstream call from the second instance")
      assert.deepStrictEqual(fromSecond, fromFirst)

      const [ttl, stored] = yield* Effect.service(Redis.Redis).pipe(
        Effect.flatMap((redis) =>
          Effect.all([
            redis.send<number>("PTTL", `${keyPrefix}rates-cache:rates:v2:latest:usd:bitcoin`),
            redis.send<string>("GET", `${keyPrefix}rates-cache:rates:v2:latest:usd:bitcoin`)
          ])),
        Effect.provide(first)
      )
      const entry = JSON.parse(stored) as { storedAt: number; freshUntil: number }
      // One currency asked, on Demo's 10,000 credits: fresh for the pacer's interval (coingecko/latestPrices.ts).
      const paced = Math.ceil(1 / (PRICES_SHARE * planFor(10_000).ratePerMs))
      assert.strictEqual(entry.freshUntil - entry.storedAt, paced, "fresh for the interval the month's pace allows")
      assert.isAbove(paced, 5 * 60_000)
      assert.isAbove(ttl, 60_000, "then kept as the last good copy")
    }))

  it.live("the calls-per-minute budget is shared by all instances", () =>
    Effect.gen(function*() {
      const env = healthyEnv(emulator.url, { COINGECKO_CALLS_PER_MIN: "6", COINGECKO_REFRESH_RESERVE_PCT: "0" })
      const keyPrefix = `test-${randomUUID()}:`
      const first = yield* Layer.build(instance(env, keyPrefix))
      yield* removeKeysOnExit(first, keyPrefix)

      // The lists (currencies, coin list, one page of ranks), then latest prices and a series: 5 calls.
      yield* askVia(first, { symbols: ["PEPE"], currency: "usd", days: 30 })
      assert.strictEqual(emulator.stats().total, 5)
      const second = yield* Layer.build(instance(env, keyPrefix))
      const error = yield* Effect.flip(askVia(second, { symbols: ["ETH"], currency: "usd", days: 30 }))
      assert.strictEqual(error._tag, "RatesUnavailableError")
      assert.strictEqual(emulator.stats().total, 6)
    }))

  it.live("a caller's share is one share across instances", () =>
    Effect.gen(function*() {
      const env = healthyEnv(emulator.url, { COINGECKO_CALLS_PER_MIN: "30" }) // a share of 10 calls a minute
      const keyPrefix = `test-${randomUUID()}:`
      const first = yield* Layer.build(instance(env, keyPrefix))
      yield* removeKeysOnExit(first, keyPrefix)
      const caller = "ip:198.51.100.1"
      for (const currency of ["usd", "eur", "gbp", "chf", "cad"]) {
        yield* askVia(first, { symbols: ["BTC"], currency, days: 30, caller }) // latest prices and a series: 2 calls
      }
      const second = yield* Layer.build(instance(env, keyPrefix))
      const error = yield* Effect.flip(askVia(second, { symbols: ["BTC"], currency: "jpy", days: 30, caller }))
      assert.strictEqual(error._tag, "RatesUnavailableError")
      assert.match(error._tag === "RatesUnavailableError" ? error.reason : "", /this caller's share/)
      const other = yield* askVia(second, { symbols: ["BTC"], currency: "jpy", days: 30, caller: "ip:198.51.100.2" })
      assert.deepStrictEqual(other.rates.map((r) => r.id), ["bitcoin"])
    }))

  it.live("a Redis outage fails closed on credits (issue 27): no call without the ledger, a 503 for what nothing holds", () =>
    Effect.gen(function*() {
      const lonely = yield* Layer.build(
        coinGeckoAloneRedis("").pipe(Layer.provide(configFrom(healthyEnv(emulator.url))),
          Layer.provide(layerSharedCell("")),
          Layer.provide(Layer.mergeAll(upstreamHttp, refusingRedis, DailyHistory.layerMemory))
        )
      )
      emulator.resetStats()
      const failure = yield* Effect.flip(askVia(lonely, { symbols: ["SOL"], currency: "usd", days: 7 }))
      assert.strictEqual(failure._tag, "RatesUnavailableError")
      assert.strictEqual(emulator.stats().byQuery["markets:ids"] ?? 0, 0, "no data call without a credit")
    }))
})
