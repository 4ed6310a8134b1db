/**
 * Issue 22, the second source (Coinbase) against CoinGecko, over real HTTP against both emulators (C4 "Second
 * source", amended). One table, CoinGecko × Coinbase: each cell a fresh service with fresh emulators failing as the
 * cell says from start-up, nothing held, asking `{"cryptos":["BTC","ETH"],"days":7}`; what each cell answered is
 * printed as a table for the closing note. The outcome follows from one rule:
 *   - CoinGecko healthy: CoinGecko's answers, as fast, no Coinbase data call, whatever Coinbase does;
 *   - CoinGecko cannot serve and Coinbase can: Coinbase's answer, price and every daily point equal to the emulator's,
 *     oldest first at 00:00 UTC, in USD and EUR; a coin Coinbase does not list keeps CoinGecko's verdict;
 *   - neither can (or RATES_FALLBACK=none, Coinbase then never asked): CoinGecko's verdict stands, a failure (5xx,
 *     reset, bad body, our key rejected) a 502 `upstream_error` that operators are alerted to, a refusal (429, its
 *     breaker open, the month's credits spent) a 503 with Retry-After, never longer than CoinGecko's own;
 *   - within the request's budget (3 s here, COINGECKO_REQUEST_BUDGET_MS) whatever the sources do.
 * Then the scenarios over time: one coin from each source, CoinGecko back, a stale copy.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { change24h } from "../../../src/rates/coinbase/candles.ts"
import { type CoinbaseEmulator, type CoinbaseFault, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { coinbaseDailyClose, coinbasePrice, DAY_MS, startOfUtcDay } from "../../emulators/coinbase-data.ts"
import { type CoinGeckoEmulator, type FaultOptions, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { emulatedDailyPrices } from "../../emulators/coingecko-data.ts"
import type { Env } from "../../support/config.ts"
import { freePort } from "../../support/spawn.ts"
import { ask, type Asked, coinbaseFastGuards, coinGeckoFastEnv, type FallbackApp, NOW, startFallbackApp, summary } from "./rates-fallback-support.ts"

const QUERY = { cryptos: ["BTC", "ETH"], days: 7 }
/** CoinGecko's Retry-After when it answers 429: long, so that "the shorter of the two waits" is visible. */
const COINGECKO_RETRY_AFTER = 30
const TODAY = startOfUtcDay(NOW)
const SYMBOLS = [["BTC", "bitcoin"], ["ETH", "ethereum"]] as const

/** How CoinGecko cannot serve, from start-up (or, `healthy`, serves). */
const coinGeckoCases = {
  healthy: { verdict: undefined },
  "429": { verdict: 503, fault: { mode: "429", retryAfterSeconds: COINGECKO_RETRY_AFTER } },
  "5xx": { verdict: 502, fault: { mode: "5xx", status: 500 } },
  truncated: { verdict: 502, fault: { mode: "truncated" } },
  "wrong-shape": { verdict: 502, fault: { mode: "wrong-shape" } },
  reset: { verdict: 502, fault: { mode: "reset" } },
  "401 (our key rejected)": { verdict: 502, fault: { mode: "401" } },
  // One failed request opens the breaker (1 failure); then CoinGecko is healthy, but not called.
  "breaker open": { verdict: 503, env: { COINGECKO_BREAKER_FAILURES: "1" } },
  "credits spent": { verdict: 503, env: { COINGECKO_CALLS_PER_MONTH: "1000" }, spent: 1000 }
} satisfies Record<string, { verdict: 502 | 503 | undefined; fault?: FaultOptions; env?: Env; spent?: number }>
type CoinGeckoCase = keyof typeof coinGeckoCases

/** Coinbase, as the cell has it from start-up. "/products" is the product list and every product; "/products/" only the products' data. */
const coinbaseCases = {
  ok: {},
  "5xx (every call)": { fault: { mode: "5xx" } },
  "5xx 500 (every call)": { fault: { mode: "5xx", status: 500 } },
  "5xx (data calls; product list answered)": { fault: { mode: "5xx", paths: ["/products/"] } },
  "slow (5 s, every call)": { latency: ["/products", 5_000] },
  "slow (5 s, data calls)": { latency: ["/products/", 5_000] },
  "unreachable (closed port)": { unreachable: true },
  "none (RATES_FALLBACK=none)": { env: { RATES_FALLBACK: "none" } }
} satisfies Record<string, { fault?: CoinbaseFault; latency?: readonly [string, number]; unreachable?: true; env?: Env }>
type CoinbaseCase = keyof typeof coinbaseCases

const cannot: ReadonlyArray<CoinbaseCase> = ["unreachable (closed port)", "5xx 500 (every call)", "5xx (data calls; product list answered)", "none (RATES_FALLBACK=none)"]
const table: ReadonlyArray<readonly [CoinGeckoCase, ReadonlyArray<CoinbaseCase>]> = [
  ["healthy", ["5xx (every call)", "slow (5 s, every call)"]],
  ["429", ["ok", "5xx (every call)", "slow (5 s, data calls)", "unreachable (closed port)", "5xx 500 (every call)", "5xx (data calls; product list answered)", "none (RATES_FALLBACK=none)"]],
  ["5xx", ["ok", "5xx (every call)", "slow (5 s, data calls)", ...cannot]],
  ["truncated", cannot],
  ["wrong-shape", cannot],
  ["reset", cannot],
  ["401 (our key rejected)", cannot],
  ["breaker open", ["ok", "5xx (every call)", "slow (5 s, data calls)"]],
  ["credits spent", ["ok", "5xx (every call)", "slow (5 s, data calls)"]]
]
const cells = table.flatMap(([coinGeckoCase, columns]) => columns.map((coinbaseCase) => [coinGeckoCase, coinbaseCase] as const))

const answers: Array<string> = []
const record = (name: string, answered: Asked) => answers.push(`  ${name.padEnd(72)} → ${summary(answered)}`)
afterAll(() => console.info(`CoinGecko × Coinbase, ${JSON.stringify(QUERY)} unless said:\n${answers.join("\n")}`))

/** One cell's world: both emulators, started failing as the cell says, and the service on them. */
const startCell = async (coinGeckoCase: CoinGeckoCase, coinbaseCase: CoinbaseCase) => {
  const g = coinGeckoCases[coinGeckoCase] as { fault?: FaultOptions; env?: Env; spent?: number }
  const c = coinbaseCases[coinbaseCase] as { fault?: CoinbaseFault; latency?: readonly [string, number]; unreachable?: true; env?: Env }
  const [coinGecko, coinbase, closedPort] = await Promise.all([
    startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW }),
    startCoinbaseEmulator({ host: "127.0.0.1", now: NOW, rateLimit: false }),
    freePort()
  ])
  if (g.fault !== undefined) coinGecko.setFault(g.fault)
  if (coinGeckoCase === "breaker open") coinGecko.setFault("5xx")
  if (c.fault !== undefined) coinbase.setFault(c.fault)
  if (c.latency !== undefined) coinbase.setLatency(...c.latency)
  const app = await startFallbackApp({
    coinGeckoEnv: coinGeckoFastEnv(coinGecko.url, { ...g.env, ...c.env }),
    coinbaseUrl: c.unreachable ? `http://127.0.0.1:${closedPort}` : coinbase.url,
    coinbaseGuards: coinbaseFastGuards,
    ...(g.spent === undefined ? {} : { creditsSpent: g.spent })
  })
  if (coinGeckoCase === "breaker open") {
    await ask(app, { cryptos: ["LTC"], days: 7 })
    coinGecko.setFault("none")
    coinGecko.resetStats()
  }
  const close = async () => {
    await app.close()
    await Promise.all([coinGecko.close(), coinbase.close()])
  }
  return { app, coinGecko, coinbase, close }
}

/** The emulator's Coinbase points as the service must serve them: the close of day D-1 at 00:00 UTC of D. */
const coinbaseSeries = (product: string, days: number) =>
  Array.from({ length: days }, (_, i) => {
    const day = TODAY - (days - 1 - i) * DAY_MS
    return [day, coinbaseDailyClose(product, day - DAY_MS, NOW)!] as const
  })

const dataCalls = (coinbase: CoinbaseEmulator) =>
  Object.entries(coinbase.stats().byPath).filter(([path]) => path !== "/products").reduce((sum, [, n]) => sum + n, 0)

/** Asserts a 200 answered wholly by Coinbase, equal to the emulator's. */
const expectCoinbase = (body: Record<string, any>, currency: string, days: number) => {
  expect(body.source).toBe("coinbase")
  expect(body.attribution).toBe("Data provided by Coinbase Exchange")
  expect(body.stale).toBe(false)
  expect(body.currency).toBe(currency.toUpperCase())
  expect(body.rates.map((r: any) => r.id)).toEqual(SYMBOLS.map(([, id]) => id))
  for (const rate of body.rates) {
    const product = `${rate.symbol}-${currency.toUpperCase()}`
    expect(rate.source).toBe("coinbase")
    expect(rate.price).toBe(coinbasePrice(product, NOW))
    expect(rate.change["24h"]).toBeCloseTo(change24h({ open: coinbasePrice(product, NOW - DAY_MS), last: coinbasePrice(product, NOW) }), 10)
    expect(rate.series).toEqual(coinbaseSeries(product, days))
    expect(rate.series.every(([t]: [number]) => t % DAY_MS === 0)).toBe(true)
    expect(rate.series.at(-1)[0]).toBe(TODAY)
  }
}

/** CoinGecko's verdict on a query neither source serves; after its 429, Retry-After at most CoinGecko's. */
const expectVerdict = (answered: Asked, verdict: 502 | 503, coinGeckoCase: CoinGeckoCase) => {
  const line = `${answered.status} ${JSON.stringify(answered.body)}`
  expect(answered.status, line).toBe(verdict)
  expect(answered.contentType).toMatch(/^application\/problem\+json/)
  expect(answered.body.status).toBe(verdict)
  if (verdict === 502) return void expect(answered.body.code).toBe("upstream_error")
  expect(answered.body.code).toBe("service_unavailable")
  expect(Number(answered.retryAfter)).toBeGreaterThan(0)
  if (coinGeckoCase === "429") expect(Number(answered.retryAfter)).toBeLessThanOrEqual(COINGECKO_RETRY_AFTER)
}

describe("CoinGecko × Coinbase", () => {
  it.each(cells)("CoinGecko %s × Coinbase %s", async (coinGeckoCase, coinbaseCase) => {
    const name = `CoinGecko ${coinGeckoCase} × Coinbase ${coinbaseCase}`
    const { verdict } = coinGeckoCases[coinGeckoCase]
    const cell = await startCell(coinGeckoCase, coinbaseCase)
    try {
      const { app, coinGecko, coinbase } = cell
      if (verdict === undefined) {
        const cold = await ask(app, { cryptos: ["BTC", "ETH", "SOL"], currency: "usd", days: 30 })
        const warm = await ask(app, { cryptos: ["BTC", "ETH", "SOL"], currency: "usd", days: 7 })
        record(`${name}, BTC,ETH,SOL 30 d then 7 d`, warm)
        for (const answered of [cold, warm]) {
          expect(answered.status).toBe(200)
          expect(answered.body.source).toBe("coingecko")
          expect(answered.body.attribution).toBe("Data provided by CoinGecko")
          expect(answered.body.rates.every((r: any) => r.source === "coingecko")).toBe(true)
        }
        expect(cold.body.rates[0].series).toEqual(emulatedDailyPrices("bitcoin", "usd", 30, NOW).slice(0, -1))
        // Healthy CoinGecko answers in well under a second; a Coinbase call on the path would cost 5 s or its retries.
        expect(cold.ownMs).toBeLessThan(2_000)
        expect(warm.ownMs).toBeLessThan(500)
        expect(dataCalls(coinbase), JSON.stringify([coinbase.stats().byPath, cold.body, coinGecko.stats().byPath])).toBe(0)
        return
      }
      const answered = await ask(app, QUERY)
      record(name, answered)
      expect(answered.ownMs).toBeLessThan(4_000)
      if (coinbaseCase === "ok") {
        expect(answered.status, JSON.stringify(answered.body)).toBe(200)
        expectCoinbase(answered.body, "usd", 7)
        const eur = await ask(app, { cryptos: ["BTC", "ETH"], currency: "eur", days: 30 })
        expect(eur.status, JSON.stringify(eur.body)).toBe(200)
        expectCoinbase(eur.body, "eur", 30)
        // BNB: a curated coin Coinbase does not list; neither source can serve it, alone or beside one both can
        // (a partial answer would look complete).
        expectVerdict(await ask(app, { cryptos: ["BNB"], days: 7 }), verdict, coinGeckoCase)
        expectVerdict(await ask(app, { cryptos: ["BTC", "BNB"], days: 7 }), verdict, coinGeckoCase)
      } else expectVerdict(answered, verdict, coinGeckoCase)
      if (coinbaseCase === "none (RATES_FALLBACK=none)") expect(coinbase.stats().total, "Coinbase is never asked").toBe(0)
      // With its breaker open, CoinGecko is not called for the query; with the credits spent, not at all (no list either).
      if (coinGeckoCase === "breaker open") expect(coinGecko.stats().byPath["/coins/markets"] ?? 0, "CoinGecko is not called").toBe(0)
      else if (coinGeckoCase === "credits spent") expect(coinGecko.stats().total, "no CoinGecko call without credits").toBe(0)
      else if (verdict === 502) {
        // Met on the coins' own data, not only on the start-up lists.
        const asked = Object.keys(coinGecko.stats().byPath).filter((path) => /bitcoin|ethereum/.test(path) || path === "/coins/markets")
        expect(asked.length, `CoinGecko was asked for the coins: ${JSON.stringify(coinGecko.stats().byPath)}`).toBeGreaterThan(0)
      }
    } finally {
      await cell.close()
    }
  }, 30_000)
})

describe("over time, against one pair of emulators", () => {
  let coinGecko: CoinGeckoEmulator
  let coinbase: CoinbaseEmulator
  const apps: Array<FallbackApp> = []
  beforeAll(async () => {
    coinGecko = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
    coinbase = await startCoinbaseEmulator({ host: "127.0.0.1", now: NOW, rateLimit: false })
  })
  afterAll(async () => {
    for (const app of apps) await app.close()
    await coinGecko.close()
    await coinbase.close()
  })
  beforeEach(() => {
    coinGecko.setFault("none")
    coinbase.setFault("none")
    coinGecko.resetStats()
    coinbase.resetStats()
  })
  const started = async (app: Promise<FallbackApp>) => {
    const ready = await app
    apps.push(ready)
    return ready
  }

  it("one coin CoinGecko cannot serve: that rate is Coinbase's, the answer mixed, both attributed", async () => {
    coinGecko.setFault({ mode: "5xx", paths: ["/coins/ethereum"] })
    const app = await started(startFallbackApp({ coinGeckoEnv: coinGeckoFastEnv(coinGecko.url), coinbaseUrl: coinbase.url, coinbaseGuards: coinbaseFastGuards }))
    const answered = await ask(app, QUERY)
    record("CoinGecko 5xx on ethereum only × Coinbase ok", answered)
    expect(answered.status).toBe(200)
    expect(answered.body.source).toBe("mixed")
    expect(answered.body.rates.map((r: any) => [r.symbol, r.source])).toEqual([["BTC", "coingecko"], ["ETH", "coinbase"]])
    expect(answered.body.attribution).toBe("Data provided by CoinGecko; Data provided by Coinbase Exchange")
  }, 30_000)

  it("CoinGecko back: the next answer after a Coinbase one (held a minute at most) is CoinGecko's, and the stored points agree", async () => {
    coinGecko.setFault({ mode: "429", retryAfterSeconds: 1 })
    const app = await started(startFallbackApp({ coinGeckoEnv: coinGeckoFastEnv(coinGecko.url), coinbaseUrl: coinbase.url }))
    const query = { cryptos: ["BTC", "ETH"], currency: "usd", days: 30 }
    const during = await ask(app, query)
    expect(during.status).toBe(200)
    expect(during.body.source).toBe("coinbase")
    coinGecko.setFault("none")
    // The Coinbase answer is repeated for a minute at most (its prices' life): then CoinGecko's.
    const repeated = await ask(app, query)
    expect(repeated.body.source).toBe("coinbase")
    app.advance(61_000)
    const after = await ask(app, query)
    const answered = [summary(repeated), summary(after)]
    expect(after.status).toBe(200)
    expect(after.body.source, answered.join("; ")).toBe("coingecko")
    expect(after.body.attribution).toBe("Data provided by CoinGecko")
    for (const rate of after.body.rates) {
      expect(rate.source).toBe("coingecko")
      expect(rate.series).toEqual(emulatedDailyPrices(rate.id, "usd", 30, NOW).slice(0, -1))
    }
    let largest = { relative: 0, at: "" }
    let overlap = 0
    for (const [, id] of SYMBOLS) {
      const fromCoinbase = new Map(await app.held(id, "usd", "coinbase"))
      const fromCoinGecko = await app.held(id, "usd", "coingecko")
      expect(fromCoinbase.size).toBeGreaterThanOrEqual(364)
      for (const [day, price] of fromCoinGecko) {
        const other = fromCoinbase.get(day)
        if (other === undefined) continue
        overlap++
        const relative = Math.abs(other - price) / price
        if (relative > largest.relative) largest = { relative, at: `${id} ${new Date(day).toISOString().slice(0, 10)}` }
      }
    }
    expect(overlap).toBeGreaterThanOrEqual(2 * 364)
    // Two venues differ a little (the emulator: at most 0.06 %); a day off would differ by percents.
    expect(largest.relative).toBeLessThan(0.001)
    console.info(`CoinGecko back: during ${summary(during)}; within the minute, then 61 s later: ${answered.join("; ")}; stored points of both sources over ${overlap} days: largest difference ${
      (largest.relative * 100).toFixed(4)
    } % (${largest.at})`)
  }, 30_000)

  it("a stale CoinGecko copy is not fresh: Coinbase answers; with Coinbase failing too, the stale copy does", async () => {
    const app = await started(startFallbackApp({ coinGeckoEnv: coinGeckoFastEnv(coinGecko.url), coinbaseUrl: coinbase.url }))
    const query = { cryptos: ["BTC", "ETH"], currency: "usd", days: 7 }
    const fresh = await ask(app, query)
    expect(fresh.body.source).toBe("coingecko")
    coinGecko.setFault("5xx")
    app.advance(2 * 3_600_000) // the latest prices past their life and their hour of grace
    const replaced = await ask(app, query)
    expect(replaced.status).toBe(200)
    expect(replaced.body.source).toBe("coinbase")
    expect(replaced.body.stale).toBe(false)
    coinbase.setFault("5xx")
    app.advance(61_000) // past the Coinbase answer's minute
    const lastGood = await ask(app, query)
    expect(lastGood.status).toBe(200)
    expect(lastGood.body.source).toBe("coingecko")
    expect(lastGood.body.stale).toBe(true)
    expect(lastGood.body.rates.map((r: any) => r.series)).toEqual(fresh.body.rates.map((r: any) => r.series))
    console.info(`held copies aged 2 h, CoinGecko 5xx: Coinbase ok → ${summary(replaced)}; Coinbase failing too → ${summary(lastGood)}`)
  }, 30_000)
})
