/**
 * Defect: a failing second source turned CoinGecko's failures into 503 "temporarily unavailable".
 * CONTRACT C4 "Second source" (amended): a coin neither source can serve, with no copy held, keeps
 * CoinGecko's verdict: 502 `upstream_error` when CoinGecko failed (5xx, reset, bad body, our key
 * rejected), 503 `service_unavailable` with Retry-After (the shorter of the two sources' waits) when it
 * was rate-limited. A second source never turns a failure into "temporarily unavailable": a rejected key
 * must stay a 502 that operators are alerted to.
 *
 * Over real HTTP only: POST /api/v1/exchange-rates `{"cryptos":["LINK"],"days":3}` (a curated coin that
 * Coinbase lists), each case on a fresh service (nothing held for LINK) with its own CoinGecko emulator,
 * faults switched through the emulators' `/__control`. `RATES_FALLBACK=none` rows check that the faults
 * themselves are 502s, so that a failure of the other rows is the second source's doing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { freePort } from "../../support/spawn.ts"
import { coinbaseFastGuards, coinGeckoFastEnv, NOW, startFallbackApp } from "./rates-fallback-support.ts"

const QUERY = { cryptos: ["LINK"], days: 3 }
/** CoinGecko's Retry-After in the 429 rows: long, so that "the shorter of the two waits" is visible. */
const COINGECKO_RETRY_AFTER = 30

const control = async (url: string, body: unknown) => {
  const res = await fetch(url, { method: "POST", body: JSON.stringify(body) })
  if (res.status !== 200) throw new Error(`${url} refused ${JSON.stringify(body)}: ${res.status} ${await res.text()}`)
}

const coinGeckoFaults = {
  "5xx": { mode: "5xx", status: 500 },
  truncated: { mode: "truncated" },
  "wrong-shape": { mode: "wrong-shape" },
  reset: { mode: "reset" },
  "401 (our key rejected)": { mode: "401" },
  "429": { mode: "429", retryAfterSeconds: COINGECKO_RETRY_AFTER }
} as const
type CoinGeckoFault = keyof typeof coinGeckoFaults
type CoinbaseCase = "unreachable (closed port)" | "5xx (every call)" | "5xx (data calls; product list answered)" | "none (RATES_FALLBACK=none)"

// Two Coinbase emulators failing for the whole file (their faults never change, so cases share them),
// and a port nothing listens on.
let failingEverywhere: CoinbaseEmulator
let failingData: CoinbaseEmulator
let closedPort: number
const table: Array<string> = []

beforeAll(async () => {
  ;[failingEverywhere, failingData, closedPort] = await Promise.all([
    startCoinbaseEmulator({ host: "127.0.0.1", now: NOW, rateLimit: false }),
    startCoinbaseEmulator({ host: "127.0.0.1", now: NOW, rateLimit: false }),
    freePort()
  ])
  await control(`${failingEverywhere.url}/__control`, { mode: "5xx", status: 500 })
  // "/products/" is every product's path, not the list's ("/products"): Coinbase lists LINK-USD, then fails.
  await control(`${failingData.url}/__control`, { mode: "5xx", paths: ["/products/"] })
})
afterAll(async () => {
  await failingEverywhere?.close()
  await failingData?.close()
  console.info(`${JSON.stringify(QUERY)}, nothing held, CoinGecko × Coinbase:\n${table.sort().join("\n")}`)
})

const coinbaseUrl = (coinbaseCase: CoinbaseCase) =>
  coinbaseCase === "5xx (every call)"
    ? failingEverywhere.url
    : coinbaseCase === "5xx (data calls; product list answered)"
    ? failingData.url
    : `http://127.0.0.1:${closedPort}`

interface Answered {
  readonly status: number
  readonly contentType: string | null
  readonly retryAfter: string | null
  readonly body: Record<string, any>
  readonly line: string
}

/** One case: a fresh CoinGecko emulator failing as told from the start, a fresh service, one request. */
const askWith = async (fault: CoinGeckoFault, coinbaseCase: CoinbaseCase): Promise<Answered> => {
  const coinGecko = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
  try {
    await control(coinGecko.url.replace(/\/api\/v3$/, "/__control"), coinGeckoFaults[fault])
    const app = await startFallbackApp({
      coinGeckoEnv: coinGeckoFastEnv(coinGecko.url, coinbaseCase === "none (RATES_FALLBACK=none)" ? { RATES_FALLBACK: "none" } : {}),
      coinbaseUrl: coinbaseUrl(coinbaseCase),
      coinbaseGuards: coinbaseFastGuards
    })
    try {
      const res = await fetch(`${app.url}/api/v1/exchange-rates`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(QUERY)
      })
      const body = (await res.json()) as Record<string, any>
      const retryAfter = res.headers.get("retry-after")
      // A failure must have been met on LINK's own data, not only on the start-up lists (after a 429 on
      // those, the service rightly keeps CoinGecko's cool-down and asks nothing more).
      if (fault !== "429") {
        const asked = Object.keys(coinGecko.stats().byPath).filter((path) => path.includes("chainlink") || path === "/coins/markets")
        expect(asked.length, `CoinGecko was asked for LINK: ${JSON.stringify(coinGecko.stats().byPath)}`).toBeGreaterThan(0)
      }
      const line = `${res.status} ${body.code ?? body.source} Retry-After=${retryAfter}${body.detail === undefined ? "" : ` (${body.detail})`}`
      table.push(`  ${fault.padEnd(22)} × ${coinbaseCase.padEnd(40)} → ${line}`)
      return { status: res.status, contentType: res.headers.get("content-type"), retryAfter, body, line }
    } finally {
      await app.close()
    }
  } finally {
    await coinGecko.close()
  }
}

const coinbaseCases: ReadonlyArray<CoinbaseCase> = ["unreachable (closed port)", "5xx (every call)", "5xx (data calls; product list answered)"]
const failed: Array<CoinGeckoFault> = ["5xx", "truncated", "wrong-shape", "reset", "401 (our key rejected)"]

// Independent cases (each its own emulator and service): run together, vitest's maxConcurrency at a time.
describe.concurrent("a coin neither source can serve keeps CoinGecko's verdict (C4 Second source, amended)", () => {
  const failures = failed.flatMap((fault) => [...coinbaseCases, "none (RATES_FALLBACK=none)" as const].map((c) => [fault, c] as const))
  it.each(failures)("CoinGecko %s × Coinbase %s → 502 upstream_error", async (fault, coinbaseCase) => {
    const answered = await askWith(fault, coinbaseCase)
    expect(answered.status, answered.line).toBe(502)
    expect(answered.contentType).toMatch(/^application\/problem\+json/)
    expect(answered.body.code).toBe("upstream_error")
    expect(answered.body.status).toBe(502)
  }, 30_000)

  // Rate-limited stays "come back later", after the shorter wait: never longer than CoinGecko's own.
  it.each(coinbaseCases)("CoinGecko 429 × Coinbase %s → 503 service_unavailable, Retry-After at most CoinGecko's", async (coinbaseCase) => {
    const answered = await askWith("429", coinbaseCase)
    expect(answered.status, answered.line).toBe(503)
    expect(answered.contentType).toMatch(/^application\/problem\+json/)
    expect(answered.body.code).toBe("service_unavailable")
    expect(Number(answered.retryAfter)).toBeGreaterThan(0)
    expect(Number(answered.retryAfter)).toBeLessThanOrEqual(COINGECKO_RETRY_AFTER)
  }, 30_000)
})
