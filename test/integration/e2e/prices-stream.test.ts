/**
 * The price stream end to end (C10, docs/prices.md): the service as `npm start` runs it against the CoinGecko and
 * Coinbase emulators on the real clock; its events checked against the emulator's own ticks; every refusal before a
 * stream; HEAD; CORS; SIGTERM ending open streams at once while the process exits promptly.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { type ServiceProcess, spawnService, tempDataDir } from "../../support/spawn.ts"
import { feedOrigin, openStream, waitFor } from "./prices-stream-support.ts"

const TICK_MS = 500

describe("GET /api/v1/prices/stream", () => {
  let coingecko: CoinGeckoEmulator
  let coinbase: CoinbaseEmulator
  let service: ServiceProcess
  const start = (env: Record<string, string> = {}) =>
    spawnService({
      COINGECKO_BASE_URL: coingecko.url,
      COINBASE_BASE_URL: coinbase.url,
      COINBASE_WS_URL: coinbase.wsUrl,
      DATA_DIR: tempDataDir(),
      TRUST_PROXY: "true",
      CORS_ORIGINS: "https://landing.example",
      LIVE_STREAMS_PER_ADDRESS: "2",
      LIVE_STREAMS_MAX: "3",
      ...env
    }, 30_000)
  const streamUrl = (query: string) => `${service.url}/api/v1/prices/stream?${query}`

  beforeAll(async () => {
    coingecko = await startCoinGeckoEmulator({ host: "127.0.0.1" })
    coinbase = await startCoinbaseEmulator({ host: "127.0.0.1", feed: { tickEveryMs: TICK_MS, dropEvery: 0 } })
    service = await start()
  }, 60_000)
  afterAll(async () => {
    await service?.stop("SIGKILL")
    await coinbase?.close()
    await coingecko?.close()
  })

  it("sends a snapshot, then the feed's ticks as price events: prices equal, lag bounded, ids increasing", async () => {
    const stream = await openStream(streamUrl("cryptos=btc,ETH,FOO,eth"), { origin: "https://landing.example", "x-forwarded-for": "203.0.113.1" })
    try {
      expect(stream.status).toBe(200)
      expect(stream.headers.get("content-type")).toBe("text/event-stream; charset=utf-8")
      expect(stream.headers.get("cache-control")).toBe("no-cache, no-transform")
      expect(stream.headers.get("x-accel-buffering")).toBe("no")
      expect(stream.headers.get("content-encoding")).toBeNull()
      expect(stream.headers.get("access-control-allow-origin")).toBe("https://landing.example")
      expect(stream.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
      const coinbasePrices = () => stream.events.filter((e) => e.event === "price" && JSON.parse(e.data).source === "coinbase")
      await waitFor("ten price events from the feed", () => coinbasePrices().length >= 10, 40_000)
      expect(stream.retry()).toBe("3000")
      const [snapshot] = stream.events
      expect(snapshot!.event).toBe("snapshot")
      const body = JSON.parse(snapshot!.data)
      expect(body.currency).toBe("USD")
      expect(body.unknown).toEqual(["FOO"])
      const ids = stream.events.map((e) => Number(e.id))
      for (let i = 1; i < ids.length; i++) expect(ids[i]).toBeGreaterThan(ids[i - 1]!)
      for (const event of coinbasePrices()) {
        const price = JSON.parse(event.data) as { symbol: string; price: number; at: string }
        // What the emulator published (its own record): a trade at that time, or a heartbeat naming that trade (the
        // service moves a price's time on when a heartbeat names its trade: docs/rates.md "Live quotes").
        const origin = feedOrigin(coinbase.feedPublished(`${price.symbol}-USD`), price.price, Date.parse(price.at))
        expect(origin, `${price.symbol} ${price.price} at ${price.at}, published by the feed`).toBeDefined()
        // A round (50 ms) after the tick reached the service, on a busy machine.
        expect(event.receivedAt - Date.parse(price.at)).toBeLessThan(2_000)
      }
      // At most 4 events a second per symbol: never two of one symbol within a round.
      for (const symbol of ["BTC", "ETH"]) {
        const times = coinbasePrices().filter((e) => JSON.parse(e.data).symbol === symbol).map((e) => e.receivedAt)
        expect(times.length).toBeGreaterThan(2)
      }
    } finally {
      stream.close()
    }
  }, 60_000)

  it("refuses before any stream, as problems", async () => {
    const problem = async (res: Response) => ({ status: res.status, type: res.headers.get("content-type"), body: await res.json() as Record<string, unknown> })
    const none = await problem(await fetch(streamUrl("cryptos=FOO,BAR")))
    expect(none).toMatchObject({ status: 400, type: "application/problem+json", body: { code: "no_valid_symbols", unknown: ["FOO", "BAR"] } })
    const malformed = await problem(await fetch(streamUrl("cryptos=B%20TC")))
    expect(malformed).toMatchObject({ status: 400, body: { code: "validation_failed" } })
    const currency = await problem(await fetch(streamUrl("cryptos=BTC&currency=xyz")))
    expect(currency).toMatchObject({ status: 400, body: { code: "validation_failed", errors: [{ pointer: "/currency" }] } })
    const post = await fetch(streamUrl("cryptos=BTC"), { method: "POST" })
    expect(post.status).toBe(405)
    expect(post.headers.get("allow")).toBe("GET, HEAD")
    await post.body?.cancel()

    // Per address (LIVE_STREAMS_PER_ADDRESS=2), then per process (LIVE_STREAMS_MAX=3).
    const a = "198.51.100.7"
    const held = [await openStream(streamUrl("cryptos=BTC"), { "x-forwarded-for": a }), await openStream(streamUrl("cryptos=ETH"), { "x-forwarded-for": a })]
    try {
      expect(held.map((s) => s.status)).toEqual([200, 200])
      const third = await fetch(streamUrl("cryptos=BTC"), { headers: { "x-forwarded-for": a } })
      expect(third.status).toBe(429)
      expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0)
      expect((await third.json()).code).toBe("rate_limited")
      held.push(await openStream(streamUrl("cryptos=SOL"), { "x-forwarded-for": "198.51.100.8" }))
      const beyond = await fetch(streamUrl("cryptos=BTC"), { headers: { "x-forwarded-for": "198.51.100.9" } })
      expect(beyond.status).toBe(503)
      expect(Number(beyond.headers.get("retry-after"))).toBeGreaterThan(0)
      expect((await beyond.json()).code).toBe("service_unavailable")
    } finally {
      for (const s of held) s.close()
    }
    // A closed stream frees its place.
    await waitFor("a place freed", async () => {
      const again = await fetch(`${service.url}/api/v1/prices/stream?cryptos=BTC`, { method: "HEAD", headers: { "x-forwarded-for": a } })
      return again.status === 200
    }, 10_000)
  }, 60_000)

  it("HEAD answers the head only; a preflight is allowed for a listed origin", async () => {
    const head = await fetch(streamUrl("cryptos=BTC"), { method: "HEAD" })
    expect(head.status).toBe(200)
    expect(head.headers.get("content-type")).toBe("text/event-stream; charset=utf-8")
    expect(await head.text()).toBe("")
    const preflight = await fetch(streamUrl("cryptos=BTC"), {
      method: "OPTIONS",
      headers: { origin: "https://landing.example", "access-control-request-method": "GET" }
    })
    expect(preflight.status).toBe(204)
    expect(preflight.headers.get("access-control-allow-methods")).toBe("GET, HEAD")
  })

  it("sends a comment after the silence of a heartbeat", async () => {
    // SOL in JPY: CoinGecko's price alone, refreshed far less often than 15 s.
    const stream = await openStream(streamUrl("cryptos=SOL&currency=jpy"))
    try {
      expect(stream.status).toBe(200)
      await waitFor("a heartbeat comment", () => stream.comments() >= 1, 40_000)
    } finally {
      stream.close()
    }
  }, 60_000)

  it("SIGTERM ends open streams at once and the process exits promptly", async () => {
    const stream = await openStream(streamUrl("cryptos=BTC"))
    expect(stream.status).toBe(200)
    await waitFor("the snapshot", () => stream.events.length >= 1)
    const sent = Date.now()
    const exited = service.stop("SIGTERM")
    const endedAt = await stream.ended
    expect(endedAt - sent).toBeLessThan(2_000)
    expect(await exited).toBe(0)
    expect(Date.now() - sent).toBeLessThan(5_000)
  }, 30_000)
})
