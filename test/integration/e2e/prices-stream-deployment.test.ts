/**
 * The price stream across a deployment (C10, docs/prices.md): two instances sharing one Redis against the emulators on the
 * real clock. One Coinbase feed connection serves both instances' streams; a coin no live quote covers (PEPE) is priced
 * from CoinGecko's copies and moves when a refresh brings a new price, at no credit beyond the refreshes a POST of the
 * same symbol makes; and with the feed ticking 20 times a second a stream still gets at most 4 events a second per
 * symbol, its last one the feed's latest tick. What the feed sent is the emulator's own record of it (`feedPublished`).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { emulatedPrice } from "../../emulators/coingecko-data.ts"
import { feedConnected, type LiveRig, startLiveRig } from "./rates-live-support.ts"
import { feedOrigin, lastFeedPrice, openStream, type OpenStream, type StreamEvent, waitFor } from "./prices-stream-support.ts"

/** 20 ticks a second per pair: five times what a stream may send. */
const TICK_MS = 50
/** The shortest refresh of latest prices the configuration allows for a quick test (the month's pace set out of reach). */
const LATEST_TTL_S = 2
const FROZEN_AT = Date.parse("2026-12-07T21:00:00.000Z")

interface Price {
  readonly symbol: string
  readonly price: number
  readonly change24h: number | null
  readonly at: string
  readonly source: string
}

const pricesOf = (stream: OpenStream, symbol: string, source?: string) =>
  stream.events
    .filter((e) => e.event === "price")
    .map((e) => ({ event: e, price: JSON.parse(e.data) as Price }))
    .filter(({ price }) => price.symbol === symbol && (source === undefined || price.source === source))

/** A symbol's price as a stream holds it now: its last price event, else the snapshot's. */
const heldBy = (stream: OpenStream, symbol: string): Price | undefined => {
  const last = pricesOf(stream, symbol).at(-1)?.price
  if (last !== undefined) return last
  const snapshot = stream.events.find((e: StreamEvent) => e.event === "snapshot")
  return snapshot === undefined ? undefined : (JSON.parse(snapshot.data) as { prices: Array<Price> }).prices.find((p) => p.symbol === symbol)
}

describe("the price stream across two instances sharing one Redis", () => {
  let rig: LiveRig
  const url = (i: number, query: string) => `${rig.services[i]!.url}/api/v1/prices/stream?${query}`
  const feedConnections = () => rig.coinbase.stats().feed.connections
  /** Coinbase REST ticker and stats calls so far: what serves a pair while it is down. */
  const restQuotes = () => Object.entries(rig.coinbase.stats().byPath).filter(([path]) => /\/(ticker|stats)$/.test(path)).reduce((n, [, c]) => n + c, 0)

  beforeAll(async () => {
    rig = await startLiveRig({
      instances: 2,
      redis: true,
      metrics: true,
      coinbase: { feed: { tickEveryMs: TICK_MS, dropEvery: 0 } },
      // CoinGecko's clock frozen: its prices are known (emulatedPrice) and move only when the test moves it.
      coingecko: { now: FROZEN_AT },
      env: { COINGECKO_LATEST_TTL_S: String(LATEST_TTL_S), COINGECKO_CALLS_PER_MONTH: "1000000000", COINGECKO_CALLS_PER_MIN: "600" }
    })
    await waitFor("both instances reading the feed", async () => (await Promise.all(rig.metricsPorts.map(feedConnected))).every(Boolean), 60_000)
  }, 120_000)
  afterAll(async () => {
    await rig?.close()
  })

  it("one feed connection for the deployment; both instances' streams get its ticks, prices equal, lag bounded", async () => {
    expect(feedConnections(), "the deployment's feed connections").toBe(1)
    const restBefore = restQuotes()
    const streams = await Promise.all([0, 1].map((i) => openStream(url(i, "cryptos=BTC,ETH"), { "x-forwarded-for": `203.0.113.${i + 1}` })))
    try {
      expect(streams.map((s) => s.status)).toEqual([200, 200])
      for (const stream of streams) {
        await waitFor("ten feed prices of each symbol", () => ["BTC", "ETH"].every((s) => pricesOf(stream, s, "coinbase").length >= 10), 40_000)
      }
      expect(feedConnections(), "the deployment's feed connections").toBe(1)
      // Taken once the streams hold their prices: it has every trade they can show.
      const published = new Map(["BTC", "ETH"].map((s) => [s, rig.coinbase.feedPublished(`${s}-USD`)]))
      const restCalls = restQuotes() - restBefore
      for (const [i, stream] of streams.entries()) {
        // The record holds each pair's last 10,000 trades (over 8 minutes at 20 a second): a price older is not told.
        const inRecord = (price: Price) => Date.parse(price.at) >= (published.get(price.symbol)!.trades[0]?.time ?? Infinity)
        const checked = ["BTC", "ETH"].flatMap((s) => pricesOf(stream, s, "coinbase")).filter(({ price }) => inRecord(price))
        expect(checked.length, `instance ${i}: feed prices to check`).toBeGreaterThanOrEqual(16)
        for (const { event, price } of checked) {
          // Every price is a trade the feed published, at its time or at a heartbeat's naming it. The pairs stay live
          // throughout (their REST tickers serve only a pair silent or behind for 30 s, docs/rates.md "Live quotes").
          const origin = feedOrigin(published.get(price.symbol)!, price.price, Date.parse(price.at))
          expect(origin, `instance ${i}: ${price.symbol} ${price.price} at ${price.at} is no published trade (REST ticker calls meanwhile: ${restCalls})`).toBeDefined()
          // Through the relay for the instance that does not hold the feed, then a round (250 ms), on a busy machine.
          expect(event.receivedAt - origin!.sentAt, `instance ${i}: ${price.symbol} at ${price.at}`).toBeLessThan(5_000)
        }
      }
    } finally {
      for (const stream of streams) stream.close()
    }
  }, 90_000)

  it("at most 4 price events a second per symbol with the feed ticking 20 times a second; the last one is the latest tick", async () => {
    const openedAt = Date.now()
    const streams = await Promise.all([0, 1].map((i) => openStream(url(i, "cryptos=BTC,ETH"), { "x-forwarded-for": `203.0.113.${i + 11}` })))
    try {
      for (const stream of streams) {
        await waitFor("twenty feed prices of each symbol", () => ["BTC", "ETH"].every((s) => pricesOf(stream, s, "coinbase").length >= 20), 40_000)
      }
      const ticked = rig.coinbase.feedPublished("BTC-USD").trades.filter((t) => t.time >= openedAt)
      const tickSpan = ticked.at(-1)!.time - ticked[0]!.time
      expect(ticked.length / (tickSpan / 1_000), "the feed ticks faster than 4 a second").toBeGreaterThan(8)
      for (const [i, stream] of streams.entries()) {
        for (const symbol of ["BTC", "ETH"]) {
          const times = pricesOf(stream, symbol).map(({ event }) => event.receivedAt)
          const span = times.at(-1)! - times[0]!
          // One event a round at most: n - 1 intervals of at least 250 ms at the service; a reader's delays move only the ends.
          expect(times.length - 1, `instance ${i} ${symbol}: ${times.length} events in ${span} ms`).toBeLessThanOrEqual(Math.ceil(span / 250) + 2)
          // Any second of the reader's clock: 4, and one more only where a late round's bytes met the next round's.
          for (let a = 0, b = 0; a < times.length; a++) {
            while (b < times.length && times[b]! - times[a]! < 1_000) b++
            expect(b - a, `instance ${i} ${symbol}: events within a second from ${times[a]}`).toBeLessThanOrEqual(5)
          }
        }
      }
      // The feed falls silent; what it had published then is the whole of it: each pair's latest tick is its last trade.
      rig.coinbase.setFeed("silent")
      const silentAt = Date.now()
      const records = new Map(["BTC", "ETH"].map((s) => [s, rig.coinbase.feedPublished(`${s}-USD`)]))
      const latest = new Map([...records].map(([s, record]) => [s, lastFeedPrice(record)]))
      const isLatest = (symbol: string, price: Price) => price.price === latest.get(symbol)!.price && latest.get(symbol)!.at.has(Date.parse(price.at))
      for (const [i, stream] of streams.entries()) {
        // Waited for as an event: after 10 s of silence the service drops the connection and REST tickers serve.
        await waitFor(`instance ${i}: the latest ticks`, () => ["BTC", "ETH"].every((s) => pricesOf(stream, s).some(({ price }) => isLatest(s, price))), 30_000)
        for (const symbol of ["BTC", "ETH"]) {
          const prices = pricesOf(stream, symbol)
          const at = prices.findIndex(({ price }) => isLatest(symbol, price))
          expect(prices[at]!.event.receivedAt - silentAt, `instance ${i} ${symbol}: the latest tick within a few rounds of the silence`).toBeLessThan(5_000)
          // Nothing the feed published comes after it (a REST ticker's price may, once the pair is down).
          const later = prices.slice(at + 1).filter(({ price }) => feedOrigin(records.get(symbol)!, price.price, Date.parse(price.at)) !== undefined)
          expect(later.map(({ price }) => price), `instance ${i} ${symbol}: feed prices after the latest`).toEqual([])
        }
      }
    } finally {
      rig.coinbase.setFeed("normal")
      for (const stream of streams) stream.close()
    }
  }, 90_000)

  it("a coin no live quote covers: CoinGecko's copy, a new price on its refresh, no credit beyond what POST spends", async () => {
    const p0 = emulatedPrice("pepe", "usd", FROZEN_AT)
    const before = rig.coingecko.stats()
    // What POST spends for PEPE on each instance: its latest price (and its daily points).
    for (const service of rig.services) {
      const response = await fetch(`${service.url}/api/v1/exchange-rates`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": "203.0.113.30" },
        body: JSON.stringify({ cryptos: ["PEPE"], days: 1 })
      })
      expect(response.status).toBe(200)
      const body = await response.json() as { rates: Array<{ symbol: string; price: number }> }
      expect(body.rates[0]).toMatchObject({ symbol: "PEPE", price: p0 })
    }
    const afterPost = rig.coingecko.stats()
    const marketsCalls = (stats: typeof before) => stats.byQuery["markets:ids"] ?? 0
    const charts = (stats: typeof before) => Object.entries(stats.byPath).filter(([path]) => path.includes("/market_chart")).reduce((n, [, c]) => n + c, 0)
    expect(marketsCalls(afterPost) - marketsCalls(before), "POST fetched PEPE's latest price").toBeGreaterThan(0)

    const openedAt = Date.now()
    const streams = await Promise.all(Array.from({ length: 6 }, (_, k) => openStream(url(k % 2, k < 2 ? "cryptos=PEPE,BTC" : "cryptos=PEPE"), { "x-forwarded-for": `203.0.113.${40 + k}` })))
    try {
      expect(streams.map((s) => s.status)).toEqual([200, 200, 200, 200, 200, 200])
      for (const stream of streams) await waitFor("PEPE's price", () => heldBy(stream, "PEPE") !== undefined, 20_000)
      for (const stream of streams) expect(heldBy(stream, "PEPE")).toMatchObject({ price: p0, source: "coingecko" })

      // CoinGecko moves; the next refresh (every LATEST_TTL_S while PEPE is read) brings it to every stream.
      const movedTo = FROZEN_AT + 3_600_000
      const p1 = emulatedPrice("pepe", "usd", movedTo)
      expect(p1).not.toBe(p0)
      const movedAt = Date.now()
      rig.coingecko.setNow(movedTo)
      for (const stream of streams) {
        await waitFor("PEPE's new price", () => pricesOf(stream, "PEPE").some(({ price }) => price.price === p1), 30_000)
        const { event, price } = pricesOf(stream, "PEPE").find(({ price }) => price.price === p1)!
        expect(price.source).toBe("coingecko")
        expect(Date.parse(price.at), "observed at its refresh, after the move").toBeGreaterThanOrEqual(movedAt - 1_000)
        expect(event.receivedAt - movedAt, "within a refresh interval and a few rounds").toBeLessThan((LATEST_TTL_S + 8) * 1_000)
      }
      const done = rig.coingecko.stats()
      const elapsed = Date.now() - openedAt
      // Streams never ask for daily points, and their reads spend only the refreshes PEPE's demand earns (as POST's
      // would): at most one latest-prices call per instance per refresh interval, however many streams read it.
      expect(charts(done) - charts(afterPost), "daily points asked by streams").toBe(0)
      const allowed = rig.services.length * (Math.ceil(elapsed / (LATEST_TTL_S * 1_000)) + 1)
      expect(marketsCalls(done) - marketsCalls(afterPost), `latest-price calls in ${elapsed} ms`).toBeLessThanOrEqual(allowed)
    } finally {
      for (const stream of streams) stream.close()
      rig.coingecko.setNow(FROZEN_AT)
    }
  }, 90_000)
})
