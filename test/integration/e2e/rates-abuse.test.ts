/**
 * Issue 13, finding by finding: one caller cannot spend the upstream budget of the others, junk cannot
 * evict real coins' last good copies, and a failing auxiliary call does not cascade. Each test is the
 * reproduction of the issue over real HTTP (the app, the live provider, the CoinGecko emulator), with
 * the production defaults unless it says otherwise.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { type TestApp, tokenFor } from "../../support/app.ts"
import { askFrom, eventually, sendJunk, shapeCycling, sleep, startRatesApp } from "./rates-abuse-support.ts"
import { PLENTY } from "../../support/credits.ts"

const NOW = Date.UTC(2026, 10, 22, 10, 30)
let emulator: CoinGeckoEmulator
let app: TestApp | undefined

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.setLatency("/", 0)
  emulator.resetStats()
})
afterEach(async () => {
  await app?.close()
  app = undefined
})

const calls = (path: string) => emulator.stats().byPath[path] ?? 0
const symbolLookups = () => emulator.stats().byQuery["markets:symbols"] ?? 0

describe("unknown symbols and request shapes cost no upstream budget", () => {
  it("35 requests of 50 unknown symbols make no upstream call; other callers' cold queries then answer 200", async () => {
    app = await startRatesApp(emulator)
    const statuses = await sendJunk(app, "198.51.100.1", 35)
    expect(new Set(statuses)).toEqual(new Set([400]))
    expect(symbolLookups()).toBe(0)
    const dataCalls = Object.keys(emulator.stats().byPath).filter((p) => p.endsWith("/market_chart/range"))
    expect(dataCalls).toEqual([])
    const sol = await askFrom(app, "198.51.100.2", { cryptos: ["SOL"], days: 30 })
    const pepe = await askFrom(app, "198.51.100.3", { cryptos: ["PEPE"] })
    expect([sol.status, pepe.status]).toEqual([200, 200])
    expect((pepe.body.rates as Array<{ id: string }>)[0]!.id).toBe("pepe")
    console.info(`35 junk requests → upstream ${JSON.stringify(emulator.stats().byPath)}`)
  })

  it("one request for the 36 curated coins in jpy for 365 days spends its own share, not the next caller's", async () => {
    app = await startRatesApp(emulator)
    const greedy = await askFrom(app, "198.51.100.1", {
      cryptos: ["BTC", "ETH", "USDT", "BNB", "SOL", "XRP", "USDC", "ADA", "DOGE", "TRX", "TON", "DOT", "LTC", "LINK", "AVAX", "XLM",
        "BCH", "SHIB", "DAI", "WBTC", "UNI", "ATOM", "XMR", "ETC", "NEAR", "APT", "SUI", "FIL", "ICP", "HBAR", "ARB", "OP", "POL",
        "AAVE", "ALGO", "XTZ"],
      currency: "jpy",
      days: 365
    })
    const charts = Object.keys(emulator.stats().byPath).filter((p) => p.endsWith("/market_chart/range")).length
    if (greedy.status === 503) expect(Number(greedy.retryAfter)).toBeGreaterThan(0)
    const next = await askFrom(app, "198.51.100.2", { cryptos: ["PEPE", "RENDER"], currency: "eur", days: 30 })
    expect(next.status).toBe(200)
    console.info(`36 coins in jpy: ${greedy.status}, ${charts} series fetched; the next caller: ${next.status} in ${Math.round(next.ms)} ms`)
  })

  it("cycling days, currencies, order and spelling on two coins never costs another caller its query", async () => {
    app = await startRatesApp(emulator)
    expect((await askFrom(app, "198.51.100.1", { cryptos: ["BTC", "ETH"], days: 365 })).status).toBe(200)
    const before = emulator.stats().total
    const statuses: Array<number> = []
    for (const body of shapeCycling(25)) statuses.push((await askFrom(app, "198.51.100.1", body)).status)
    // New currencies are new data: charged to this caller, at most its share (10 calls a minute by default).
    expect(emulator.stats().total - before).toBeLessThanOrEqual(10)
    expect(statuses).toContain(503)
    const others = await Promise.all(["SOL", "ADA", "PEPE"].map((coin, i) => askFrom(app!, `203.0.113.${i + 1}`, { cryptos: [coin] })))
    expect(others.map((a) => a.status)).toEqual([200, 200, 200])
    console.info(`shape cycling: ${JSON.stringify(statuses)}; upstream ${JSON.stringify(emulator.stats().byPath)}`)
  })

  it("days within held data, any order and spelling: no upstream call at all", async () => {
    app = await startRatesApp(emulator)
    expect((await askFrom(app, "198.51.100.1", { cryptos: ["BTC", "ETH"], days: 365 })).status).toBe(200)
    const before = emulator.stats().total
    for (const body of shapeCycling(39).filter((b) => b.currency.toLowerCase() === "usd")) {
      expect((await askFrom(app, "198.51.100.1", body)).status).toBe(200)
    }
    expect(emulator.stats().total).toBe(before)
  })

  it("a currency the upstream does not list is refused from the list it holds, without asking upstream", async () => {
    emulator.setFault({ mode: "5xx", paths: ["/simple/supported_vs_currencies"] })
    app = await startRatesApp(emulator)
    const refused = await askFrom(app, "198.51.100.1", { cryptos: ["BTC"], currency: "xyz" })
    expect(refused.status).toBe(400)
    expect(calls("/coins/bitcoin/market_chart/range")).toBe(0)
  })
})

describe("whom cold fetches are charged to", () => {
  it("addresses of one IPv6 /64 share one share; a request with a token is charged to its client", async () => {
    app = await startRatesApp(emulator)
    const currencies = ["usd", "eur", "gbp", "jpy", "chf", "cad", "aud"]
    const statuses: Array<number> = []
    for (const [i, currency] of currencies.entries()) {
      statuses.push((await askFrom(app, `2001:db8:1:2::${i + 1}`, { cryptos: ["BTC"], currency })).status)
    }
    // Two calls per new currency (latest prices, the series): the share of 10 is spent after five.
    expect(statuses).toEqual([200, 200, 200, 200, 200, 503, 503])
    expect((await askFrom(app, "2001:db8:1:3::1", { cryptos: ["BTC"], currency: "jpy" })).status).toBe(200)
    const token = await tokenFor(app, "svc-all", "secret-all", "rates:read")
    const res = await fetch(`${app.url}/api/v1/exchange-rates`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": "2001:db8:1:2::9", authorization: `Bearer ${token}` },
      body: JSON.stringify({ cryptos: ["BTC"], currency: "aud" })
    })
    expect(res.status).toBe(200)
  })
})

describe("junk cannot evict real coins' last good copies", () => {
  it("after 160 junk requests and an outage, a query held before is answered 200 from its last good copy", async () => {
    // A generous budget: the junk really is looked at, as in the reproduction.
    app = await startRatesApp(emulator, { COINGECKO_LATEST_TTL_S: "1", COINGECKO_CALLS_PER_MIN: "10000", COINGECKO_CALLS_PER_MONTH: PLENTY })
    const held = await askFrom(app, "198.51.100.9", { cryptos: ["BTC", "ETH"], currency: "eur", days: 30 })
    expect(held.status).toBe(200)
    await sendJunk(app, "198.51.100.1", 160)
    await sleep(2_200) // past the latest prices' lifetime and its grace
    emulator.setFault("5xx")
    const during = await askFrom(app, "198.51.100.9", { cryptos: ["BTC", "ETH"], currency: "eur", days: 30 })
    expect(during.status).toBe(200)
    expect(during.body.stale).toBe(true)
    expect(during.body.rates).toEqual(held.body.rates)
  }, 60_000)
})

describe("an auxiliary call failing does not cascade", () => {
  it("currency list failing since start-up: 20 requests make at most 3 calls to it, all 200; then real queries are not refused", async () => {
    emulator.setFault({ mode: "5xx", paths: ["/simple/supported_vs_currencies"] })
    app = await startRatesApp(emulator)
    const answers = []
    for (let i = 0; i < 20; i++) answers.push(await askFrom(app, "198.51.100.1", { cryptos: ["BTC"], days: 30 }))
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200))
    expect(calls("/simple/supported_vs_currencies")).toBeLessThanOrEqual(3)
    // The answer is remembered although the list is missing: one series call, one latest-price call.
    expect(calls("/coins/bitcoin/market_chart/range")).toBe(1)
    const real = await Promise.all(["ETH", "SOL", "DOT"].map((coin, i) => askFrom(app!, `203.0.113.${i + 1}`, { cryptos: [coin] })))
    expect(real.map((a) => a.status)).toEqual([200, 200, 200])
    console.info(`currency list down: ${JSON.stringify(emulator.stats().byPath)}`)
  })

  it("fault cases one after another each get their own status: 502 for 5xx, reset, bad bodies; 503 for 429", async () => {
    app = await startRatesApp(emulator)
    expect((await askFrom(app, "198.51.100.1", { cryptos: ["BTC"] })).status).toBe(200)
    const cases = [["5xx", "XRP", 502], ["reset", "ADA", 502], ["truncated", "DOT", 502], ["wrong-shape", "LTC", 502], ["429", "LINK", 503]] as const
    const seen: Array<number> = []
    for (const [mode, coin] of cases) {
      emulator.setFault(mode)
      const answer = await askFrom(app, "198.51.100.1", { cryptos: [coin], currency: "eur" })
      emulator.setFault("none")
      seen.push(answer.status)
      expect(answer.ms).toBeLessThan(10_000)
    }
    expect(seen).toEqual(cases.map(([, , status]) => status))
  }, 60_000)
})

describe("callers never wait for a refresh", () => {
  it("after its latest prices expired, a held answer is served at once while one refresh runs behind", async () => {
    app = await startRatesApp(emulator, { COINGECKO_LATEST_TTL_S: "2", COINGECKO_CALLS_PER_MONTH: PLENTY })
    const first = await askFrom(app, "198.51.100.1", { cryptos: ["BTC"], days: 7 })
    expect(first.status).toBe(200)
    await sleep(2_100)
    emulator.setLatency("/coins", 2_000)
    const before = emulator.stats().byQuery["markets:ids"] ?? 0
    const answers = await Promise.all(Array.from({ length: 5 }, () => askFrom(app!, "198.51.100.1", { cryptos: ["BTC"], days: 7 })))
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200])
    for (const answer of answers) expect(answer.ms).toBeLessThan(1_000)
    expect(answers[0]!.body.stale).toBe(false)
    expect(await eventually(() => (emulator.stats().byQuery["markets:ids"] ?? 0) === before + 1, 3_000)).toBe(true)
    await sleep(2_100) // the refresh lands
    const after = await askFrom(app, "198.51.100.1", { cryptos: ["BTC"], days: 7 })
    expect(after.ms).toBeLessThan(1_000)
    expect(after.body.asOf).not.toBe(first.body.asOf) // made of the refreshed prices
    expect(emulator.stats().byQuery["markets:ids"]).toBe(before + 1)
  }, 30_000)
})
