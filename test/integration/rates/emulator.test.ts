/** The CoinGecko emulator's own contract, over raw HTTP, including its control API. */
import { spawn } from "node:child_process"
import { request } from "node:http"
import path from "node:path"
import { createInterface } from "node:readline"
import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { emulatedDailyPrices, emulatedPrice } from "../../emulators/coingecko-data.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { EMULATOR_NOW } from "../../support/rates.ts"

let emulator: CoinGeckoEmulator
const origin = () => emulator.url.replace(/\/api\/v3$/, "")
const get = (path: string) => fetch(`${emulator.url}${path}`)

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ now: EMULATOR_NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.setNow(EMULATOR_NOW)
  emulator.setPublishDelay(0)
  emulator.resetStats()
})

describe("CoinGecko emulator", () => {
  it("listens on 127.0.0.1 with an ephemeral port and answers /ping", async () => {
    assert.match(emulator.url, /^http:\/\/127\.0\.0\.1:\d+\/api\/v3$/)
    assert.deepStrictEqual(await (await get("/ping")).json(), { gecko_says: "(V3) To the Moon!" })
  })

  it("market_chart with interval=daily: days closes at 00:00 UTC, then 'now'", async () => {
    const body = await (await get("/coins/ethereum/market_chart?vs_currency=eur&days=5&interval=daily")).json() as { prices: Array<[number, number]> }
    assert.strictEqual(body.prices.length, 6)
    assert.deepStrictEqual(body.prices, emulatedDailyPrices("ethereum", "eur", 5, EMULATOR_NOW))
    assert.strictEqual(body.prices.at(-1)![0], EMULATOR_NOW)
    assert.strictEqual(body.prices.at(-2)![0], Date.UTC(2026, 10, 22))
  })

  it("market_chart/range: market_chart's daily closes from..to (UNIX seconds), hourly for a short range without interval", async () => {
    const day = 86_400
    const today = Date.UTC(2026, 10, 22) / 1000
    type Prices = { prices: Array<[number, number]> }
    const daily = await (await get(`/coins/ethereum/market_chart/range?vs_currency=eur&from=${today - 4 * day}&to=${today - day}&interval=daily`)).json() as Prices
    assert.deepStrictEqual(daily.prices, emulatedDailyPrices("ethereum", "eur", 5, EMULATOR_NOW).slice(0, 4))
    // Reaching "now": the closes up to today's, then "now".
    const toNow = await (await get(`/coins/ethereum/market_chart/range?vs_currency=eur&from=${today - 4 * day}&to=${today + day}&interval=daily`)).json() as Prices
    assert.deepStrictEqual(toNow.prices, emulatedDailyPrices("ethereum", "eur", 5, EMULATOR_NOW))
    const hourly = await (await get(`/coins/bitcoin/market_chart/range?vs_currency=usd&from=${today - day}&to=${today}`)).json() as Prices
    assert.strictEqual(hourly.prices.length, 25)
    assert.deepStrictEqual(hourly.prices[1], [(today - day) * 1000 + 3_600_000, emulatedPrice("bitcoin", "usd", (today - day) * 1000 + 3_600_000)])
    const long = await (await get(`/coins/bitcoin/market_chart/range?vs_currency=usd&from=${today - 100 * day}&to=${today}`)).json() as Prices
    assert.strictEqual(long.prices.length, 101, "over 90 days: daily")
    assert.strictEqual((await get(`/coins/nope/market_chart/range?vs_currency=usd&from=${today - day}&to=${today}`)).status, 404)
    const tooOld = await get(`/coins/bitcoin/market_chart/range?vs_currency=usd&from=${today - 366 * day}&to=${today}`)
    assert.strictEqual(tooOld.status, 401, "Demo's 365 days: 401 with error 10012, as market_chart")
    assert.strictEqual(((await tooOld.json()) as { error: { status: { error_code: number } } }).error.status.error_code, 10012)
    const range = (id: string) => `/coins/${id}/market_chart/range`
    assert.deepStrictEqual(emulator.stats().ranges.map((r) => r.path), [
      range("ethereum"), range("ethereum"), range("bitcoin"), range("bitcoin"), range("nope"), range("bitcoin")
    ])
    assert.deepStrictEqual(emulator.stats().ranges[0], { path: range("ethereum"), from: today - 4 * day, to: today - day })
  })

  it("refuses a call without a User-Agent with 403 and CoinGecko's body, as CoinGecko does since January 2026", async () => {
    const bare = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      // node:http sends no User-Agent of its own (fetch would send "node").
      const req = request(`${emulator.url}/ping`, (res) => {
        let body = ""
        res.on("data", (chunk) => (body += chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on("error", reject)
      req.end()
    })
    assert.strictEqual(bare.status, 403)
    assert.match(JSON.parse(bare.body).status.error_message, /^Please add a descriptive User-Agent to your request/)
    assert.strictEqual(JSON.parse(bare.body).status.error_code, 403)
    assert.strictEqual((await get("/ping")).status, 200)
  })

  it("answers CoinGecko's error shapes: 404 coin not found, 400 bad currency, 401 past 365 days", async () => {
    const missing = await get("/coins/nope/market_chart?vs_currency=usd&days=1")
    assert.strictEqual(missing.status, 404)
    assert.deepStrictEqual(await missing.json(), { error: "coin not found" })
    assert.strictEqual((await get("/coins/markets?vs_currency=xyz")).status, 400)
    const tooLong = await get("/coins/bitcoin/market_chart?vs_currency=usd&days=400")
    assert.strictEqual(tooLong.status, 401)
    assert.strictEqual(((await tooLong.json()) as { error: { status: { error_code: number } } }).error.status.error_code, 10012)
  })

  it("/coins/markets by ids, and by symbols with the top-ranked coin or all of them", async () => {
    const byIds = await (await get("/coins/markets?vs_currency=usd&ids=solana,bitcoin")).json() as Array<{ id: string; current_price: number }>
    assert.deepStrictEqual(byIds.map((r) => r.id), ["bitcoin", "solana"])
    assert.strictEqual(byIds[0]!.current_price, emulatedPrice("bitcoin", "usd", EMULATOR_NOW))
    const top = await (await get("/coins/markets?vs_currency=usd&symbols=hot,eth&include_tokens=top")).json() as Array<{ id: string }>
    assert.deepStrictEqual(top.map((r) => r.id), ["ethereum", "holotoken"])
    const all = await (await get("/coins/markets?vs_currency=usd&symbols=hot&include_tokens=all")).json() as Array<{ id: string }>
    assert.deepStrictEqual(all.map((r) => r.id), ["holotoken", "hot-cross", "hot-dog-coin"])
  })

  it("switches faults and reports stats through the control API", async () => {
    const control = await fetch(`${origin()}/__control`, {
      method: "POST",
      body: JSON.stringify({ mode: "429", retryAfterSeconds: 9, paths: ["/coins/markets"], times: 1 })
    })
    assert.strictEqual(control.status, 200)
    const limited = await get("/coins/markets?vs_currency=usd")
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.headers.get("retry-after"), "9")
    assert.strictEqual((await get("/coins/markets?vs_currency=usd")).status, 200, "times: 1")
    assert.strictEqual((await get("/ping")).status, 200, "other paths unaffected")
    const stats = await (await fetch(`${origin()}/__stats`)).json()
    const markets = stats.markets.map((call: { at: number; urlChars: number }) => ({ currency: "usd", at: call.at, urlChars: `${emulator.url}/coins/markets?vs_currency=usd`.length }))
    // Three calls, of which two answered 200: two credits, as CoinGecko bills.
    assert.deepStrictEqual(stats, { total: 3, credits: 2, byPath: { "/coins/markets": 2, "/ping": 1 }, byQuery: { "markets:ranks": 2 }, maxInFlight: 1, inFlight: 0, ranges: [], markets, callers: stats.callers })
    assert.strictEqual(stats.callers.traced, 0)
  })

  it("counts as credits the answers 200 only (a refused or failed call is billed nothing); mode 403 refuses every call as a build without a User-Agent is", async () => {
    assert.strictEqual((await get("/coins/bitcoin/market_chart/range?vs_currency=usd&from=1&to=2")).status, 401, "beyond 365 days")
    assert.strictEqual((await get("/coins/nope/market_chart?vs_currency=usd&days=1")).status, 404)
    assert.strictEqual((await get("/coins/markets?vs_currency=xyz")).status, 400)
    emulator.setFault("403")
    const refused = await get("/coins/list")
    assert.strictEqual(refused.status, 403)
    assert.match(((await refused.json()) as { status: { error_message: string } }).status.error_message, /^Please add a descriptive User-Agent/)
    emulator.setFault({ mode: "5xx", times: 1 })
    assert.strictEqual((await get("/ping")).status, 503)
    emulator.setFault({ mode: "truncated", times: 1 })
    assert.strictEqual((await get("/simple/supported_vs_currencies")).status, 200, "cut short, but answered 200: billed")
    assert.strictEqual((await get("/ping")).status, 200)
    assert.deepStrictEqual({ total: emulator.stats().total, credits: emulator.stats().credits }, { total: 7, credits: 2 })
  })

  it("answers 414 past about 8,100 characters of URL, as CoinGecko's CDN does, before anything else", async () => {
    const url = (ids: number) => `${emulator.url}/coins/markets?vs_currency=usd&ids=${Array.from({ length: ids }, (_, i) => `coin-${i}`.padEnd(40, "x")).join("%2C")}`
    const fits = Array.from({ length: 250 }, (_, n) => n).findLast((n) => url(n).length <= 8_100)!
    assert.strictEqual((await fetch(url(fits))).status, 200)
    const tooLong = await fetch(url(fits + 1))
    assert.strictEqual(tooLong.status, 414)
    assert.match(await tooLong.text(), /414 Request-URI Too Large/)
    assert.deepStrictEqual(emulator.stats().markets.map((call) => call.urlChars), [url(fits).length, url(fits + 1).length])
    assert.strictEqual(emulator.stats().credits, 1)
  })

  it("/coins/list lists every coin, and as many dead ones as asked for the flood tests", async () => {
    const listed = await (await get("/coins/list")).json() as Array<{ id: string; symbol: string; name: string }>
    assert.deepInclude(listed, { id: "holotoken", symbol: "hot", name: "Holo" })
    emulator.setExtraCoins(3)
    const flooded = await (await get("/coins/list")).json() as Array<{ id: string; symbol: string; name: string }>
    emulator.setExtraCoins(0)
    assert.strictEqual(flooded.length, listed.length + 3)
    assert.deepInclude(flooded, { id: "flood-coin-2", symbol: "fc2", name: "Flood Coin 2" })
    assert.strictEqual((await get("/coins/flood-coin-2/market_chart?vs_currency=usd&days=1")).status, 404)
    const ranked = await (await get("/coins/markets?vs_currency=usd&order=market_cap_desc&per_page=3&page=2")).json() as Array<{ market_cap_rank: number }>
    assert.deepStrictEqual(ranked.map((r) => r.market_cap_rank), [4, 5, 6])
    assert.deepStrictEqual(emulator.stats().byQuery, { "markets:ranks": 1 })
  })

  it("publishDelayMinutes (control): the 00:00 UTC close of day D is withheld until D + n minutes, on market_chart and market_chart/range", async () => {
    const day = Date.UTC(2026, 10, 23)
    type Prices = { prices: Array<[number, number]> }
    const control = (body: unknown) => fetch(`${origin()}/__control`, { method: "POST", body: JSON.stringify(body) })
    const chart = async () => (await (await get("/coins/bitcoin/market_chart?vs_currency=usd&days=3&interval=daily")).json() as Prices).prices
    const range = async (interval: string) =>
      (await (await get(`/coins/bitcoin/market_chart/range?vs_currency=usd&from=${(day - 2 * 86_400_000) / 1000}&to=${day / 1000 + 3_600}${interval}`)).json() as Prices).prices
    const closes = (prices: Array<[number, number]>) => prices.map(([t]) => t).filter((t) => t % 86_400_000 === 0)
    const set = await control({ publishDelayMinutes: 60, now: "2026-11-23T00:40:00Z" })
    assert.strictEqual(set.status, 200)
    assert.strictEqual(((await set.json()) as { publishDelayMinutes: number }).publishDelayMinutes, 60)
    // Before D + 60 min: yesterday's close is the newest; the trailing "now" point is still there.
    const late = Date.parse("2026-11-23T00:40:00Z")
    assert.deepStrictEqual(await chart(), [...emulatedDailyPrices("bitcoin", "usd", 3, late).slice(0, 2), [late, emulatedPrice("bitcoin", "usd", late)]])
    assert.deepStrictEqual(closes(await range("&interval=daily")), [day - 2 * 86_400_000, day - 86_400_000])
    const hourly = await range("")
    assert.isFalse(hourly.some(([t]) => t === day), "hourly too: no 00:00 point of D")
    assert.isTrue(hourly.some(([t]) => t === day - 3_600_000), "the other hours are there")
    // From D + 60 min on, published: the same points as without a delay.
    await control({ now: "2026-11-23T01:00:00Z" })
    const published = Date.parse("2026-11-23T01:00:00Z")
    assert.deepStrictEqual(await chart(), emulatedDailyPrices("bitcoin", "usd", 3, published))
    assert.deepStrictEqual((await range("&interval=daily")).find(([t]) => t === day), [day, emulatedPrice("bitcoin", "usd", day)])
    // 0 (the default) puts it back at once; a bad value is refused and changes nothing.
    await control({ publishDelayMinutes: 0, now: "2026-11-23T00:40:00Z" })
    assert.deepStrictEqual(await chart(), emulatedDailyPrices("bitcoin", "usd", 3, late))
    assert.strictEqual((await control({ publishDelayMinutes: -5 })).status, 400)
    assert.deepStrictEqual(await chart(), emulatedDailyPrices("bitcoin", "usd", 3, late))
  })

  it("truncated and HTML faults really send broken bodies; reset drops the connection", async () => {
    emulator.setFault("truncated")
    const truncated = await (await get("/simple/supported_vs_currencies")).text()
    assert.throws(() => JSON.parse(truncated))
    emulator.setFault("429-html")
    const page = await get("/ping")
    assert.strictEqual(page.status, 429)
    assert.match(await page.text(), /<html>/)
    emulator.setFault("reset")
    let failed = false
    await get("/ping").catch(() => {
      failed = true
    })
    assert.isTrue(failed)
  })
})

describe("CoinGecko emulator requiring a key", () => {
  let keyed: CoinGeckoEmulator
  beforeAll(async () => {
    keyed = await startCoinGeckoEmulator({ requireKey: "k-1" })
  })
  afterAll(() => keyed.close())

  it("answers 401 without the key", async () => {
    assert.strictEqual((await fetch(`${keyed.url}/ping`)).status, 401)
    assert.strictEqual((await fetch(`${keyed.url}/ping`, { headers: { "x-cg-demo-api-key": "k-1" } })).status, 200)
  })
})

describe("CoinGecko emulator, standalone", () => {
  it("node test/emulators/coingecko.ts --port 0 announces its URL, answers, and exits 0 on SIGTERM", async () => {
    const root = path.resolve(import.meta.dirname, "../../..")
    const child = spawn(process.execPath, [path.join(root, "test/emulators/coingecko.ts"), "--port", "0", "--now", "2026-11-22T10:00:00Z"], { cwd: root })
    try {
      const first = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once("line", resolve)
        child.once("exit", (code) => reject(new Error(`exited with ${code}`)))
      })
      const announced = JSON.parse(first) as { emulator: string; url: string; control: string }
      assert.strictEqual(announced.emulator, "coingecko")
      assert.match(announced.url, /^http:\/\/127\.0\.0\.1:\d+\/api\/v3$/)
      const markets = await (await fetch(`${announced.url}/coins/markets?vs_currency=usd&ids=bitcoin`)).json() as Array<{ current_price: number }>
      assert.strictEqual(markets[0]!.current_price, emulatedPrice("bitcoin", "usd", EMULATOR_NOW))
      assert.strictEqual((await fetch(announced.control, { method: "POST", body: "{\"mode\":\"5xx\"}" })).status, 200)
      assert.strictEqual((await fetch(`${announced.url}/ping`)).status, 503)
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      assert.strictEqual(await exited, 0)
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL")
    }
  })
})
