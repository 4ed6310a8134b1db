/**
 * Issue 22's fault cases: CoinGecko unable to serve (429, 5xx, breaker open, the month's credits spent)
 * × Coinbase (ok, failing, slow), each on a fresh service over real HTTP against both emulators, asking
 * `{"cryptos":["BTC","ETH"],"days":7}`. What each answered is printed as a table for the closing note.
 * Also: one coin from each source (`mixed`), and `RATES_FALLBACK=none` (today's 503, Coinbase untouched).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { ask, type Asked, coinbaseFastGuards, coinGeckoFastEnv, type FallbackApp, NOW, startFallbackApp, summary } from "./rates-fallback-support.ts"

let coinGecko: CoinGeckoEmulator
let coinbase: CoinbaseEmulator
const apps: Array<FallbackApp> = []
const table: Array<string> = []

beforeAll(async () => {
  coinGecko = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
  coinbase = await startCoinbaseEmulator({ host: "127.0.0.1", now: NOW })
})
afterAll(async () => {
  for (const app of apps) await app.close()
  await coinGecko.close()
  await coinbase.close()
  console.info(`fault cases, {"cryptos":["BTC","ETH"],"days":7}:\n${table.join("\n")}`)
})
beforeEach(() => {
  coinGecko.setFault("none")
  coinbase.setFault("none")
  coinbase.setLatency("/products/", 0)
  coinbase.setRateLimit(false) // each service keeps to 10 a second on its own; they share one emulator
  coinGecko.resetStats()
  coinbase.resetStats()
})

type CoinGeckoCase = "429" | "5xx" | "breaker open" | "credits spent"
type CoinbaseCase = "ok" | "failing (5xx)" | "slow (5 s)"

/** A service whose CoinGecko cannot serve as `coinGeckoCase` says, from start-up. */
const serviceWith = async (coinGeckoCase: CoinGeckoCase): Promise<FallbackApp> => {
  const spent = coinGeckoCase === "credits spent"
  const app = await startFallbackApp({
    coinGeckoEnv: coinGeckoFastEnv(coinGecko.url, {
      ...(coinGeckoCase === "breaker open" ? { COINGECKO_BREAKER_FAILURES: "1" } : {}),
      ...(spent ? { COINGECKO_CALLS_PER_MONTH: "1000" } : {})
    }),
    coinbaseUrl: coinbase.url,
    coinbaseGuards: coinbaseFastGuards,
    ...(spent ? { creditsSpent: 1000 } : {})
  })
  apps.push(app)
  if (coinGeckoCase === "429") coinGecko.setFault("429")
  if (coinGeckoCase === "5xx") coinGecko.setFault("5xx")
  if (coinGeckoCase === "breaker open") {
    // One failed request opens the breaker (1 failure); then CoinGecko is healthy, but not called.
    coinGecko.setFault("5xx")
    await ask(app, { cryptos: ["LTC"], days: 7 })
    coinGecko.setFault("none")
  }
  return app
}

const coinbaseFault = (coinbaseCase: CoinbaseCase) => {
  if (coinbaseCase === "failing (5xx)") coinbase.setFault("5xx")
  // Its data calls (the product list, loaded at start-up, answers at once).
  if (coinbaseCase === "slow (5 s)") coinbase.setLatency("/products/", 5_000)
}

const cases: Array<[CoinGeckoCase, CoinbaseCase]> = []
for (const g of ["429", "5xx", "breaker open", "credits spent"] as const) {
  for (const c of ["ok", "failing (5xx)", "slow (5 s)"] as const) cases.push([g, c])
}

const record = (name: string, answered: Asked) => table.push(`  ${name.padEnd(44)} → ${summary(answered)}`)

describe("issue 22, fault cases", () => {
  it.each(cases)("CoinGecko %s × Coinbase %s", async (coinGeckoCase, coinbaseCase) => {
    coinbaseFault(coinbaseCase)
    const app = await serviceWith(coinGeckoCase)
    coinGecko.resetStats()
    const answered = await ask(app, { cryptos: ["BTC", "ETH"], days: 7 })
    record(`CoinGecko ${coinGeckoCase} × Coinbase ${coinbaseCase}`, answered)
    // Within the request's budget (3 s here, COINGECKO_REQUEST_BUDGET_MS) whatever the sources do.
    expect(answered.ms).toBeLessThan(4_000)
    if (coinbaseCase === "ok") {
      expect(answered.status).toBe(200)
      expect(answered.body.source).toBe("coinbase")
      expect(answered.body.rates.map((r: any) => r.source)).toEqual(["coinbase", "coinbase"])
      expect(answered.body.attribution).toBe("Data provided by Coinbase Exchange")
    } else if (coinGeckoCase === "5xx") {
      // Neither source serves: CoinGecko's verdict stands (C4 "Second source", amended), a failure is a 502.
      expect(answered.status).toBe(502)
      expect(answered.body.code).toBe("upstream_error")
    } else {
      expect(answered.status).toBe(503)
      expect(answered.body.code).toBe("service_unavailable")
      expect(Number(answered.retryAfter)).toBeGreaterThan(0)
    }
    if (coinGeckoCase === "breaker open" || coinGeckoCase === "credits spent") {
      expect(coinGecko.stats().byPath["/coins/markets"] ?? 0, "CoinGecko is not called").toBe(0)
    }
  }, 30_000)

  it("one coin CoinGecko cannot serve: that rate is Coinbase's, the answer mixed, both attributed", async () => {
    const app = await serviceWith("5xx")
    coinGecko.setFault({ mode: "5xx", paths: ["/coins/ethereum"] })
    const answered = await ask(app, { cryptos: ["BTC", "ETH"], days: 7 })
    record("CoinGecko 5xx on ethereum only × Coinbase ok", answered)
    expect(answered.status).toBe(200)
    expect(answered.body.source).toBe("mixed")
    expect(answered.body.rates.map((r: any) => [r.symbol, r.source])).toEqual([["BTC", "coingecko"], ["ETH", "coinbase"]])
    expect(answered.body.attribution).toBe("Data provided by CoinGecko; Data provided by Coinbase Exchange")
  }, 30_000)

  it("RATES_FALLBACK=none: CoinGecko's 503 as before, Coinbase never asked", async () => {
    const app = await startFallbackApp({
      coinGeckoEnv: coinGeckoFastEnv(coinGecko.url, { RATES_FALLBACK: "none" }),
      coinbaseUrl: coinbase.url
    })
    apps.push(app)
    coinGecko.setFault("429")
    const answered = await ask(app, { cryptos: ["BTC", "ETH"], days: 7 })
    record("RATES_FALLBACK=none, CoinGecko 429", answered)
    expect(answered.status).toBe(503)
    expect(coinbase.stats().total).toBe(0)
  }, 30_000)
})
