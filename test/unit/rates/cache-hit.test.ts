/**
 * The cache-hit path: nothing upstream is built, cached entries are validated once, the answer says
 * until when it holds (`freshUntil`), and its HTTP body is exactly what the `ExchangeRatesResponse`
 * encoding gives.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { Redis } from "effect/persistence"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll } from "vitest"
import { ExchangeRatesResponse } from "../../../src/api/schemas.ts"
import { encodeRatesBody } from "../../../src/rates/answer.ts"
import { type ChartPoint, CoinGeckoClient, type MarketRow } from "../../../src/rates/coingecko/CoinGeckoClient.ts"
import { DAY_MS } from "../../../src/rates/dailySeries.ts"
import * as Rates from "../../../src/rates/layer.ts"
import { sourceError } from "../../../src/rates/upstream.ts"
import { CopyStore } from "../../../src/rates/copies/CopyStore.ts"
import { RatesProvider, type RatesQuery, type RatesResult } from "../../../src/rates/RatesProvider.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { EMULATOR_NOW, makeAgeableCache } from "../../support/rates.ts"

// ---------------------------------------------------------------------------------------------------
// An upstream stub that counts how often each call is *built* (not run): a hit must build none.

const makeStubUpstream = () => {
  const built = { markets: 0, chart: 0 }
  const auxiliary = { currencies: 0, coinList: 0, ranks: 0 }
  let priceFactor = 1
  let failing = false
  const down = <A>(value: A) =>
    failing ? Effect.fail(sourceError("coingecko", "Transient", "test: upstream down")) : Effect.succeed(value)
  const row = (id: string, symbol: string, name: string): MarketRow => ({
    id,
    symbol,
    name,
    current_price: 100 * priceFactor,
    market_cap_rank: 1,
    price_change_percentage_24h_in_currency: 1.5,
    price_change_percentage_7d_in_currency: -2,
    price_change_percentage_30d_in_currency: 10
  })
  const today = Math.floor(EMULATOR_NOW / DAY_MS) * DAY_MS
  const client = CoinGeckoClient.of({
    get supportedCurrencies() {
      auxiliary.currencies++
      return Effect.succeed(["usd", "eur"])
    },
    get coinList() {
      auxiliary.coinList++
      return Effect.succeed([{ id: "xyz-coin", symbol: "xyz", name: "Xyz Coin" }])
    },
    coinsByRank: () => {
      auxiliary.ranks++
      return Effect.succeed([])
    },
    coinRanks: () => {
      auxiliary.ranks++
      return Effect.succeed([])
    },
    marketsByIds: (_currency, ids) => {
      built.markets++
      return down(ids.map((id) => row(id, id.slice(0, 3), id)))
    },
    // The year ending today has prices id.length + 0..364; a range gets its days of it.
    marketChartRange: (id, _currency, fromSeconds, toSeconds) => {
      built.chart++
      const points: Array<ChartPoint> = []
      for (let t = Math.ceil(fromSeconds * 1000 / DAY_MS) * DAY_MS; t <= Math.min(toSeconds * 1000, today); t += DAY_MS) {
        points.push([t, id.length + 364 - (today - t) / DAY_MS])
      }
      return down([...points, [EMULATOR_NOW, 1] as const])
    }
  })
  return {
    built,
    auxiliary,
    reset: () => Object.assign(built, { markets: 0, chart: 0 }),
    setPriceFactor: (factor: number) => void (priceFactor = factor),
    setFailing: (value: boolean) => void (failing = value),
    layer: Layer.succeed(CoinGeckoClient)(client)
  }
}

const LATEST_TTL_S = 60
/** Latest prices are refreshed an attempt's time (COINGECKO_TIMEOUT_MS, 3 s) before they expire. */
const REFRESH_AT_MS = LATEST_TTL_S * 1000 - 3_000

/** The use case over the stand-in client, CoinGecko alone, credits aplenty; its copies in memory unless given. */
const providerOver = (upstream: Layer.Layer<CoinGeckoClient>, copies?: Layer.Layer<CopyStore>) =>
  Rates.layerTest({ coinGecko: upstream, env: { COINGECKO_LATEST_TTL_S: String(LATEST_TTL_S) }, copies })

const query: RatesQuery = { symbols: ["BTC", "XYZ", "ETH", "NOPE"], currency: "usd", days: 30 }
const answer = (q: RatesQuery = query) => Effect.flatMap(RatesProvider, (rates) => rates.historical(q))
const historical = (q: RatesQuery = query) => Effect.map(answer(q), ({ result }) => result)

const schemaBody = (result: RatesResult) => JSON.stringify(Schema.encodeSync(ExchangeRatesResponse)(result))
const text = (bytes: Uint8Array | undefined) => new TextDecoder().decode(bytes)

describe("CoinGecko provider on a cache hit", () => {
  it.effect("builds no upstream call, answers the same while nothing changed, and says until when it holds", () => {
    const upstream = makeStubUpstream()
    return Effect.gen(function*() {
      yield* TestClock.setTime(EMULATOR_NOW)
      const cold = yield* answer()
      assert.deepStrictEqual(upstream.built, { markets: 1, chart: 3 })
      assert.deepStrictEqual(cold.result.rates.map((r) => r.id), ["bitcoin", "xyz-coin", "ethereum"])
      assert.deepStrictEqual(cold.result.unknown, ["NOPE"])
      // The latest prices are the first to be refreshed (credits aplenty: their interval is their minute).
      assert.strictEqual(cold.freshUntil, EMULATOR_NOW + REFRESH_AT_MS)

      upstream.reset()
      const auxiliaryCalls = { ...upstream.auxiliary }
      const warm = yield* answer()
      const again = yield* answer()
      assert.deepStrictEqual(upstream.built, { markets: 0, chart: 0 })
      assert.deepStrictEqual(upstream.auxiliary, auxiliaryCalls, "the lists are held, not fetched per request")
      assert.deepStrictEqual(warm, cold)
      assert.deepStrictEqual(again, warm)
      // The points are the cached entries' own, frozen: shared, never copied.
      assert.isTrue(Object.isFrozen(warm.result.rates[0]!.series[0]))
      assert.strictEqual(warm.result.rates[0]!.series[0], again.result.rates[0]!.series[0])
      assert.strictEqual(warm.result.rates[0]!.series.length, 30)

      // Any other days is sliced from the same year of points.
      for (const days of [1, 7, 20, 90, 365]) {
        const other = yield* historical({ ...query, days })
        assert.strictEqual(other.rates[0]!.series.length, days)
        assert.deepStrictEqual(other.rates[0]!.series.slice(-1), warm.result.rates[0]!.series.slice(-1))
      }
      assert.deepStrictEqual(upstream.built, { markets: 0, chart: 0 })

      // Due for refresh: the held prices are answered while one refresh runs behind.
      upstream.setPriceFactor(2)
      yield* TestClock.adjust(Duration.millis(REFRESH_AT_MS))
      const due = yield* answer()
      assert.deepStrictEqual(due.result.rates.map((r) => r.price), [100, 100, 100])
      assert.strictEqual(due.freshUntil, EMULATOR_NOW + LATEST_TTL_S * 1000, "until the held prices expire")
      yield* Effect.yieldNow
      assert.deepStrictEqual(upstream.built, { markets: 1, chart: 0 })
      const refreshed = yield* answer()
      const refreshedAt = EMULATOR_NOW + REFRESH_AT_MS
      assert.deepStrictEqual(refreshed.result.rates.map((r) => r.price), [200, 200, 200])
      assert.strictEqual(refreshed.result.asOf, new Date(refreshedAt).toISOString().replace(".000Z", "Z"))
      assert.deepStrictEqual(refreshed.result.rates.map((r) => r.series), warm.result.rates.map((r) => r.series))
      assert.strictEqual(refreshed.freshUntil, refreshedAt + REFRESH_AT_MS)
      assert.deepStrictEqual(yield* answer(), refreshed)

      // Not asked for two lifetimes: past its grace, the next request waits for a cold fetch.
      upstream.setPriceFactor(3)
      yield* TestClock.adjust(Duration.seconds(LATEST_TTL_S * 2))
      const cold2 = yield* answer()
      assert.deepStrictEqual(cold2.result.rates.map((r) => r.price), [300, 300, 300])
      assert.deepStrictEqual(upstream.built, { markets: 2, chart: 0 })
    }).pipe(Effect.provide(providerOver(upstream.layer)))
  })

  it.effect("says freshUntil 0 for an answer made of last good copies, and for one without any rate", () => {
    const upstream = makeStubUpstream()
    const cache = makeAgeableCache()
    return Effect.gen(function*() {
      yield* TestClock.setTime(EMULATOR_NOW)
      const fresh = yield* answer()
      assert.isFalse(fresh.result.stale)
      assert.isAbove(fresh.freshUntil, EMULATOR_NOW)
      cache.expireFreshEntries()
      upstream.setFailing(true)
      const stale = yield* answer()
      assert.isTrue(stale.result.stale)
      assert.deepStrictEqual(stale.result.rates.map((r) => r.series), fresh.result.rates.map((r) => r.series))
      assert.strictEqual(stale.freshUntil, 0)
      upstream.setFailing(false)
      const none = yield* answer({ symbols: ["NOPE"], currency: "usd", days: 7 })
      assert.deepStrictEqual(none.result.rates, [])
      assert.strictEqual(none.freshUntil, 0)
    }).pipe(Effect.provide(providerOver(upstream.layer, cache.layer)))
  })

  it.effect("answers the same content from a store that hands out fresh, unfrozen copies", () => {
    const upstream = makeStubUpstream()
    const cache = makeAgeableCache()
    return Effect.gen(function*() {
      yield* TestClock.setTime(EMULATOR_NOW)
      const cold = yield* historical()
      upstream.reset()
      const warm = yield* historical()
      const again = yield* historical()
      assert.deepStrictEqual(upstream.built, { markets: 0, chart: 0 })
      assert.deepStrictEqual(warm, cold)
      assert.deepStrictEqual(again, warm)
      assert.strictEqual(text(encodeRatesBody(again)), schemaBody(cold))
    }).pipe(Effect.provide(providerOver(upstream.layer, cache.layer)))
  })

  it.effect("still refuses a cached entry that is not what we wrote", () => {
    const upstream = makeStubUpstream()
    // The provider's store, which the test writes to as well.
    const copies = Layer.succeed(CopyStore)(CopyStore.makeMemory())
    return Effect.gen(function*() {
      yield* TestClock.setTime(EMULATOR_NOW)
      const cache = yield* CopyStore
      // A chart entry from "another release": points are not [number, number].
      const times = { storedAt: EMULATOR_NOW, refreshAt: EMULATOR_NOW + 3_600_000, freshUntil: EMULATOR_NOW + 3_600_000, graceUntil: EMULATOR_NOW + 3_600_000 }
      yield* cache.set("rates:v2:chart:bitcoin:usd", { ...times, value: [["x", 1]] }, Duration.hours(1))
      const rates = yield* RatesProvider
      const { result } = yield* rates.historical({ symbols: ["BTC"], currency: "usd", days: 30 })
      assert.strictEqual(upstream.built.chart, 1) // refused as a miss and fetched again
      assert.strictEqual(result.rates[0]!.series.length, 30)
    }).pipe(Effect.provide(Layer.merge(providerOver(upstream.layer, copies), copies)))
  })
})

// ---------------------------------------------------------------------------------------------------

describe("CopyStore stores hand out frozen values, the same object while unchanged", () => {
  it.effect("memory", () =>
    Effect.gen(function*() {
      const cache = yield* CopyStore
      yield* cache.set("k", { a: [1, 2] }, Duration.minutes(1))
      const first = Option.getOrThrow(yield* cache.get("k"))
      assert.strictEqual(Option.getOrThrow(yield* cache.get("k")), first)
      assert.isTrue(Object.isFrozen(first) && Object.isFrozen((first as { a: Array<number> }).a))
      yield* cache.set("k", { a: [1, 2] }, Duration.minutes(1))
      const rewritten = Option.getOrThrow(yield* cache.get("k"))
      assert.notStrictEqual(rewritten, first)
      assert.deepStrictEqual(rewritten, first)
    }).pipe(Effect.provide(CopyStore.layerMemory())))

  it.effect("Redis: parsed once per stored text, re-parsed when another writer changed it", () => {
    const store = new Map<string, string>()
    const redis = Layer.succeed(Redis.Redis)({
      send: <A>(command: string, ...args: ReadonlyArray<string>) =>
        Effect.sync(() => {
          if (command === "GET") return (store.get(args[0]!) ?? null) as A
          store.set(args[0]!, args[1]!)
          return "OK" as A
        }),
      subscribe: () => Effect.die("unused"),
      eval: () => () => Effect.die("unused"),
      reserve: Effect.die("unused")
    } as Redis.Redis["Service"])
    return Effect.gen(function*() {
      const cache = yield* CopyStore
      yield* cache.set("k", { v: 1 }, Duration.minutes(1))
      const first = Option.getOrThrow(yield* cache.get("k"))
      assert.deepStrictEqual(first, { v: 1 })
      assert.isTrue(Object.isFrozen(first))
      assert.strictEqual(Option.getOrThrow(yield* cache.get("k")), first)
      store.set("p:k", JSON.stringify({ v: 2 })) // another instance
      assert.deepStrictEqual(Option.getOrThrow(yield* cache.get("k")), { v: 2 })
      store.set("p:k", "{not json")
      assert.isTrue(Option.isNone(yield* cache.get("k")))
      store.delete("p:k")
      assert.isTrue(Option.isNone(yield* cache.get("k")))
    }).pipe(Effect.provide(CopyStore.layerRedis({ prefix: "p:" }).pipe(Layer.provide(redis))))
  })
})

// ---------------------------------------------------------------------------------------------------

describe("encodeRatesBody", () => {
  const fake = (q: RatesQuery) => Effect.runPromise(Effect.provide(historical(q), RatesProvider.layerTest))

  it("is the ExchangeRatesResponse encoding, JSON.stringify'd, and decodes back to the result", async () => {
    const result = await fake({ symbols: ["BTC", "NOPE", "SOL"], currency: "eur", days: 30 })
    const body = text(encodeRatesBody(result))
    assert.strictEqual(body, schemaBody(result))
    assert.deepStrictEqual(Schema.decodeUnknownSync(ExchangeRatesResponse)(JSON.parse(body)), result)
  })

  it("leaves a result that does not encode to HttpApi (undefined)", async () => {
    const result = await fake({ symbols: ["ETH"], currency: "usd", days: 7 })
    assert.isUndefined(encodeRatesBody({ ...result, rates: [{ ...result.rates[0]!, price: Number.NaN }] }))
    assert.isUndefined(encodeRatesBody({ ...result, days: 1.5 }))
  })
})

// ---------------------------------------------------------------------------------------------------

describe("POST /api/v1/exchange-rates with encoded bodies", () => {
  const upstream = makeStubUpstream()
  let app: TestApp
  beforeAll(async () => {
    app = await startTestApp({ rates: providerOver(upstream.layer) })
  })
  afterAll(() => app.close())

  const post = (body: unknown) =>
    fetch(`${app.url}/api/v1/exchange-rates`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    })

  it("answers a cache hit with the same bytes, valid ExchangeRatesResponse in schema order", async () => {
    const bodies: Array<string> = []
    for (let i = 0; i < 3; i++) {
      const res = await post({ cryptos: ["btc", "xyz", "ETH", "nope", "BTC"], currency: "USD", days: 30 })
      assert.strictEqual(res.status, 200)
      assert.strictEqual(res.headers.get("content-type"), "application/json")
      bodies.push(await res.text())
    }
    const decoded = Schema.decodeUnknownSync(ExchangeRatesResponse)(JSON.parse(bodies[0]!))
    assert.deepStrictEqual(decoded.rates.map((r) => r.symbol), ["BTC", "XYZ", "ETH"])
    assert.deepStrictEqual(decoded.unknown, ["NOPE"])
    for (const body of bodies) assert.strictEqual(body, schemaBody(decoded))
    assert.strictEqual(bodies[2], bodies[1])
  })

  it("still answers the fake provider's results exactly as the schema encodes them", async () => {
    const fakeApp = await startTestApp()
    try {
      const res = await fetch(`${fakeApp.url}/api/v1/exchange-rates`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ cryptos: ["SOL", "BTC"], currency: "gbp", days: 3 })
      })
      assert.strictEqual(res.status, 200)
      assert.strictEqual(res.headers.get("content-type"), "application/json")
      const expected = await Effect.runPromise(
        Effect.provide(historical({ symbols: ["SOL", "BTC"], currency: "gbp", days: 3 }), RatesProvider.layerTest)
      )
      assert.strictEqual(await res.text(), schemaBody(expected))
    } finally {
      await fakeApp.close()
    }
  })
})
