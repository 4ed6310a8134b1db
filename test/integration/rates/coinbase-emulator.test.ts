/**
 * The Coinbase Exchange emulator's own documented behaviours, over plain fetch: what the client's
 * tests rely on must hold of the emulator first (shapes, 300-candle limit, 404, granularity, gaps, the
 * public rate limit, prices agreeing with the CoinGecko emulator's), and it runs on its own.
 */
import { spawn } from "node:child_process"
import { request } from "node:http"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { coinbaseDailyClose, coinbasePrice, DAY_MS, GAPPY_PRODUCT, startOfUtcDay, tradedOn } from "../../emulators/coinbase-data.ts"
import { emulatedPrice } from "../../emulators/coingecko-data.ts"
import { EMULATOR_NOW } from "../../support/rates.ts"

let emulator: CoinbaseEmulator
const TODAY = startOfUtcDay(EMULATOR_NOW)

beforeAll(async () => {
  emulator = await startCoinbaseEmulator({ now: EMULATOR_NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.setRateLimit(true)
  emulator.resetStats()
})

const get = async (path: string) => {
  const response = await fetch(`${emulator.url}${path}`)
  return { status: response.status, body: await response.json() as any }
}
const iso = (ms: number) => new Date(ms).toISOString()
const candlesPath = (id: string, from: number, to: number, granularity = 86_400) =>
  `/products/${id}/candles?granularity=${granularity}&start=${iso(from)}&end=${iso(to)}`

describe("the Coinbase emulator's public market data", () => {
  it("refuses a call without a User-Agent: 400 {message}, as Coinbase answers", async () => {
    const bare = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      // node:http sends no User-Agent of its own (fetch would send "node").
      const req = request(`${emulator.url}/products/BTC-USD/ticker`, (res) => {
        let body = ""
        res.on("data", (chunk) => (body += chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on("error", reject)
      req.end()
    })
    expect([bare.status, JSON.parse(bare.body)]).toEqual([400, { message: "User-Agent header is required." }])
    expect((await get("/products/BTC-USD/ticker")).status).toBe(200)
    expect(emulator.stats().callers.byUserAgent).toEqual({ "": 1, node: 1 })
  })

  it("lists products with Coinbase's fields: majors in USD and EUR, stablecoin pairs, and some not tradable", async () => {
    const { body, status } = await get("/products")
    expect(status).toBe(200)
    const ids = body.map((p: any) => p.id)
    for (const id of ["BTC-USD", "BTC-EUR", "ETH-USD", "ETH-EUR", "SOL-EUR", "LTC-USD", "BTC-USDT", "ETH-USDC", "USDT-EUR"]) {
      expect(ids).toContain(id)
    }
    expect(body.find((p: any) => p.id === "BTC-EUR")).toMatchObject({ base_currency: "BTC", quote_currency: "EUR", status: "online", trading_disabled: false })
    expect(body.filter((p: any) => p.status !== "online" || p.trading_disabled).map((p: any) => p.id).sort()).toEqual(["DAI-USD", "XTZ-USDT"])
  })

  it("candles: [time, low, high, open, close, volume] newest first at 00:00 UTC, today's closing at the current price", async () => {
    const { body, status } = await get(candlesPath("BTC-EUR", TODAY - 4 * DAY_MS, TODAY))
    expect(status).toBe(200)
    expect(body.map((c: Array<number>) => c[0] * 1000)).toEqual([0, 1, 2, 3, 4].map((k) => TODAY - k * DAY_MS))
    for (const [time, low, high, open, close] of body as Array<Array<number>>) {
      expect(open).toBe(coinbasePrice("BTC-EUR", time * 1000))
      expect(close).toBe(coinbaseDailyClose("BTC-EUR", time * 1000, EMULATOR_NOW))
      expect(low).toBeLessThanOrEqual(Math.min(open, close))
      expect(high).toBeGreaterThanOrEqual(Math.max(open, close))
    }
    expect(body[0][4]).toBe(coinbasePrice("BTC-EUR", EMULATOR_NOW))
  })

  it("a day without trades has no candle (the thin market XTZ-EUR)", async () => {
    const { body } = await get(candlesPath(GAPPY_PRODUCT, TODAY - 19 * DAY_MS, TODAY))
    const days: Array<number> = body.map((c: Array<number>) => c[0] * 1000)
    const expected = Array.from({ length: 20 }, (_, k) => TODAY - k * DAY_MS).filter((day) => tradedOn(GAPPY_PRODUCT, day))
    expect(days).toEqual(expected)
    expect(days.length).toBe(16)
  })

  it("refuses more than 300 candles, an unknown granularity and an unknown product, with Coinbase's {message}", async () => {
    const tooMany = await get(candlesPath("BTC-USD", TODAY - 300 * DAY_MS, TODAY))
    expect(tooMany.status).toBe(400)
    expect(tooMany.body.message).toMatch(/exceeds 300/)
    expect((await get(candlesPath("BTC-USD", TODAY - 299 * DAY_MS, TODAY))).body).toHaveLength(300)
    for (const granularity of [0, 120, 86_401]) {
      const wrong = await get(candlesPath("BTC-USD", TODAY - DAY_MS, TODAY, granularity))
      expect([wrong.status, wrong.body]).toEqual([400, { message: "Unsupported granularity" }])
    }
    for (const path of ["/products/FOO-USD/candles?granularity=86400", "/products/FOO-USD/ticker", "/products/FOO-USD/stats", "/nothing"]) {
      expect(await get(path)).toEqual({ status: 404, body: { message: "NotFound" } })
    }
  })

  it("without start and end: the 300 candles ending now; epoch seconds work like ISO", async () => {
    const { body } = await get("/products/ETH-USD/candles?granularity=86400")
    expect(body).toHaveLength(300)
    expect(body[0][0] * 1000).toBe(TODAY)
    const seconds = await get(`/products/ETH-USD/candles?granularity=3600&start=${(EMULATOR_NOW - 3 * 3_600_000) / 1000}&end=${EMULATOR_NOW / 1000}`)
    expect(seconds.body.map((c: Array<number>) => c[0] * 1000)).toEqual([0, 1, 2, 3].map((k) => EMULATOR_NOW - k * 3_600_000))
  })

  it("ticker and stats write prices as strings", async () => {
    const ticker = (await get("/products/ETH-EUR/ticker")).body
    expect(ticker.price).toBe(String(coinbasePrice("ETH-EUR", EMULATOR_NOW)))
    expect(Date.parse(ticker.time)).toBe(EMULATOR_NOW)
    for (const field of ["bid", "ask", "volume", "size"]) expect(typeof ticker[field]).toBe("string")
    const stats = (await get("/products/ETH-EUR/stats")).body
    expect(stats).toMatchObject({ open: String(coinbasePrice("ETH-EUR", EMULATOR_NOW - DAY_MS)), last: ticker.price })
    for (const field of ["high", "low", "volume", "volume_30day"]) expect(typeof stats[field]).toBe("string")
  })

  it("its prices are CoinGecko's within ±0.06 %: the close of day D is CoinGecko's point of D+1 00:00", () => {
    for (const [id, coin, currency] of [["BTC-USD", "bitcoin", "usd"], ["ETH-EUR", "ethereum", "eur"], ["SOL-USDT", "solana", "usd"]] as const) {
      for (let k = 1; k <= 30; k++) {
        const day = TODAY - k * DAY_MS
        const close = coinbaseDailyClose(id, day, EMULATOR_NOW)!
        const reference = emulatedPrice(coin, currency, day + DAY_MS)
        expect(Math.abs(close / reference - 1), `${id} ${iso(day)}`).toBeLessThanOrEqual(0.0006 + (id === "SOL-USDT" ? 0.002 : 1e-9))
      }
    }
  })

  it("answers 429 {message} past 15 requests at once from one address, then serves again at 10 a second", async () => {
    const started = performance.now()
    const answers = await Promise.all(Array.from({ length: 40 }, () =>
      fetch(`${emulator.url}/products/BTC-USD/ticker`).then(async (r) => ({ status: r.status, body: await r.json() }))))
    const elapsedSeconds = (performance.now() - started) / 1000
    const served = answers.filter((a) => a.status === 200).length
    expect(served).toBeGreaterThanOrEqual(15)
    expect(served).toBeLessThanOrEqual(15 + Math.ceil(elapsedSeconds * 10))
    // The refusals' own bodies: a request sent after the burst may find a token refilled (10 a second).
    const refused = answers.filter((a) => a.status !== 200)
    expect(refused.map((a) => a.status)).toEqual(refused.map(() => 429))
    expect(refused[0]?.body).toEqual({ message: "Public rate limit exceeded" })
    expect(emulator.stats().byStatus["429"]).toBe(40 - served)
    await new Promise((resolve) => setTimeout(resolve, 250))
    expect((await get("/products/BTC-USD/ticker")).status).toBe(200)
  })

  it("faults by control, counted in /__stats", async () => {
    const control = (body: unknown) => fetch(`${emulator.url}/__control`, { method: "POST", body: JSON.stringify(body) }).then((r) => r.json())
    await control({ mode: "5xx", paths: ["/products/BTC-USD"], times: 1, resetStats: true })
    expect((await get("/products/BTC-USD/ticker")).status).toBe(503)
    expect((await get("/products/BTC-USD/ticker")).status).toBe(200)
    await control({ mode: "wrong-shape" })
    expect(Object.keys((await get("/products")).body)).toEqual(["data"])
    const stats = await fetch(`${emulator.url}/__stats`).then((r) => r.json())
    expect(stats).toMatchObject({ total: 3, byPath: { "/products/BTC-USD/ticker": 2, "/products": 1 }, byStatus: { "503": 1, "200": 2 } })
  })

  it("dates its answers by its own clock, as Coinbase does; lists only the products set listed", async () => {
    const response = await fetch(`${emulator.url}/products/BTC-USD/candles?granularity=86400`)
    expect(response.headers.get("date")).toBe(new Date(EMULATOR_NOW).toUTCString())
    emulator.setListed(["BTC-USD", "ETH-EUR"])
    try {
      expect((await get("/products")).body.map((p: any) => p.id)).toEqual(["BTC-USD", "ETH-EUR"])
      emulator.setListed([])
      expect((await get("/products")).body).toEqual([])
    } finally {
      emulator.setListed(undefined)
    }
    expect((await get("/products")).body.length).toBeGreaterThan(40)
  })

  it("runs on its own: one JSON line with its URL and control URL", async () => {
    const child = spawn(process.execPath, ["test/emulators/coinbase.ts", "--port", "0", "--now", iso(EMULATOR_NOW)], { stdio: ["ignore", "pipe", "inherit"] })
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let seen = ""
        child.stdout.on("data", (chunk: Buffer) => {
          seen += chunk.toString()
          if (seen.includes("\n")) resolve(seen.trim())
        })
        child.once("exit", (code) => reject(new Error(`exited with ${code}`)))
      })
      const printed = JSON.parse(line)
      expect(printed).toMatchObject({ emulator: "coinbase", url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) })
      expect(printed.control).toBe(`${printed.url}/__control`)
      expect(printed.ws).toBe(`${printed.url.replace(/^http/, "ws")}/ws-feed`)
      const ticker = await fetch(`${printed.url}/products/BTC-USD/ticker`).then((r) => r.json())
      expect(ticker.price).toBe(String(coinbasePrice("BTC-USD", EMULATOR_NOW)))
    } finally {
      child.kill("SIGTERM")
    }
  })
})
