/**
 * Issue 32, point 3: one feed connection for a deployment that shares a Redis (src/rates/coinbase/feed/relay.ts
 * over src/platform/leadership/redis.ts). Two instances of the live quotes, each with its own board and
 * Coinbase client, on the machine's Redis under a prefix of their own, with a short lease: one connection
 * between them, both serving the feed's quotes; a pair one instance asks is subscribed by the holder; when
 * the holder stops, the other takes the feed over. Before (ae86018), every instance opened its own
 * connection and subscribed every pair itself.
 */
import { NodeRedis } from "@effect/platform-node"
import { randomUUID } from "node:crypto"
import { Clock, Context, Effect, Exit, Layer, Scope } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import * as LeadershipRedis from "../../../../src/platform/leadership/redis.ts"
import * as CoinbaseLiveQuotes from "../../../../src/rates/coinbase/liveQuotes.ts"
import { CoinbaseProducts } from "../../../../src/rates/coinbase/products.ts"
import { LiveQuotes, type WantedCoin } from "../../../../src/rates/ports.ts"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../../emulators/coinbase.ts"
import { coinbaseClient } from "../../../support/coinbase.ts"
import { spendingUntil } from "../../../../src/rates/upstream.ts"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
// Guards short enough for a test, long enough that a loaded machine's pauses (CI runs two files at once)
// end no connection and move no lease (an instance whose lease check takes longer than checkMs leads
// alone meanwhile, src/platform/leadership/redis.ts): the assertions count connections.
const guards = { pairSilenceMs: 3_000, pairBehindMs: 3_000, feedSilenceMs: 3_000, feedFirstRetryMs: 100, feedMaxRetryMs: 400, feedBatchMs: 100, feedAnnounceMs: 300, restQuoteMs: 1_000, productsRetryMs: 200 }
const BTC: WantedCoin = { symbol: "BTC", id: "bitcoin" }

let emulator: CoinbaseEmulator
beforeAll(async () => {
  emulator = await startCoinbaseEmulator({ host: "127.0.0.1", rateLimit: false, feed: { tickEveryMs: 200, heartbeatEveryMs: 200 } })
})
afterAll(() => emulator.close())

interface Instance {
  readonly quotes: (coins: ReadonlyArray<WantedCoin>, currency: string) => Promise<ReadonlyMap<string, { readonly storedAt: number }>>
  readonly stop: () => Promise<void>
}
const running: Array<Instance> = []
afterEach(async () => {
  for (const instance of running.splice(0)) await instance.stop()
})

/** One instance: its own live quotes, Coinbase client and Redis connection; the lease under `prefix`. */
const startInstance = async (prefix: string): Promise<Instance> => {
  const layer = Layer.unwrap(Effect.sync(() => CoinbaseLiveQuotes.layer(emulator.wsUrl))).pipe(
    Layer.provide(Layer.mergeAll(
      CoinbaseProducts.layer,
      LeadershipRedis.layerRedis({ prefix, leaseMs: 6_000, checkMs: 1_000 }).pipe(Layer.provide(NodeRedis.layer({ url: redisUrl })))
    )),
    Layer.provide(coinbaseClient(emulator.url, guards))
  )
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const live = Context.get(context, LiveQuotes)
  const instance: Instance = {
    quotes: (coins, currency) => Effect.runPromise(live.quotes(coins, currency).pipe(spendingUntil(Date.now() + 2_000))),
    stop: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
  running.push(instance)
  return instance
}

const until = async (test: () => boolean | Promise<boolean>, ms: number) => {
  const end = Date.now() + ms
  while (!(await test())) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
const restCalls = () => Object.entries(emulator.stats().byPath).filter(([path]) => path.endsWith("/ticker")).reduce((n, [, calls]) => n + calls, 0)

/** A quote observed within the last 600 ms: from the feed (a REST ticker is older, or absent). */
const liveOn = async (instance: Instance, coin: WantedCoin, currency: string) => {
  const quote = (await instance.quotes([coin], currency)).get(coin.id)
  return quote !== undefined && Effect.runSync(Clock.currentTimeMillis) - quote.storedAt < 600
}

describe("issue 32 (3): one feed connection per deployment sharing a Redis", () => {
  it("two instances: one connection, both live; a pair either asks is subscribed by the holder; the other takes over when it stops", async () => {
    const prefix = `test-feed-${randomUUID()}:`
    // A fresh quote alone may be a REST ticker's, just loaded: live means the feed's connection is open too.
    const fromFeed = async (instance: Instance, currency: string) => emulator.stats().feed.connections === 1 && (await liveOn(instance, BTC, currency))
    const a = await startInstance(prefix)
    await until(() => fromFeed(a, "usd"), 10_000)
    const b = await startInstance(prefix)
    await until(() => fromFeed(b, "usd"), 10_000)
    expect(emulator.stats().feed.mostOpen, "never two connections open at once").toBe(1)
    expect(emulator.stats().feed.accepted).toBe(1)

    // B asks a pair nobody follows yet (its REST ticker meanwhile): the holder (A) subscribes it, and B reads it from the feed.
    await b.quotes([BTC], "usdt")
    await until(() => emulator.stats().feed.byProduct["BTC-USDT"]?.subscribers === 1, 5_000)
    await new Promise((resolve) => setTimeout(resolve, 2 * guards.restQuoteMs + 500))
    const calls = restCalls()
    for (let i = 0; i < 3; i++) expect(await liveOn(b, BTC, "usdt")).toBe(true)
    expect(restCalls(), "from the relayed feed, not the REST ticker").toBe(calls)
    expect(emulator.stats().feed.mostOpen, JSON.stringify({ ...emulator.stats().feed, byProduct: undefined, callers: undefined })).toBe(1)
    expect(emulator.stats().feed.accepted).toBe(1)

    // A stops (it gives the lease back): B holds the feed, with every pair followed.
    await a.stop()
    await until(() => emulator.stats().feed.accepted === 2 && emulator.stats().feed.connections === 1, 5_000)
    expect(emulator.stats().feed.mostOpen).toBe(1)
    await until(async () => (await fromFeed(b, "usd")) && (await fromFeed(b, "usdt")), 10_000)
    expect(emulator.stats().feed.limited).toEqual({ connections: 0, messages: 0, subscriptions: 0 })
  }, 60_000)
})
