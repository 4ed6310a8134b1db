/**
 * Every upstream fault mode × every upstream call an operation makes, through the HTTP app with the
 * live upstream Layers (short timeouts) against the emulators: CoinGecko's modes on the two calls
 * behind POST /api/v1/exchange-rates (latest prices, daily series), and the Brevo and
 * Listmonk modes on POST /api/subscribe, each also as a one-off blip that a retry must absorb.
 * Each case asserts the status and problem code, a response-time bound, and that /api/health still
 * answers 200 afterwards. (Redis down: test/integration/production/redis.test.ts.)
 */
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { brevoServiceEnv, type BrevoEmulator, startBrevoEmulator } from "../../emulators/brevo.ts"
import { type CoinGeckoEmulator, type FaultMode as CoinGeckoFault, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { type ListmonkEmulator, startListmonkEmulator } from "../../emulators/listmonk.ts"
import type { FaultMode as NewsletterFault } from "../../emulators/newsletter-kit.ts"
import * as Newsletters from "../../../src/newsletter/layer.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { configFrom } from "../../support/config.ts"
import { BASE } from "../../support/problems.ts"
import { type Checked, expectNoViolations } from "../../support/fuzz/harness.ts"
import { send } from "../../support/fuzz/http.ts"
import { jsonOf, violationsOf } from "../../support/fuzz/invariants.ts"
import { loadOpenApi, type OpenApiModel } from "../../support/fuzz/openapi.ts"
import * as Rates from "../../../src/rates/layer.ts"
import { PLENTY } from "../../support/credits.ts"
import { upstreamHttp } from "../../support/upstream.ts"

const NOW = Date.UTC(2026, 10, 22, 10, 30)
/** Upstream budget per request (COINGECKO_REQUEST_BUDGET_MS) and the newsletter deadline, plus slack. */
const RATES_BOUND_MS = 1_500 + 1_000
const NEWSLETTER_BOUND_MS = 1_200 + 800

const post = async (app: TestApp, model: OpenApiModel, path: string, body: unknown): Promise<Checked> => {
  const response = await send(app.url, { method: "POST", path, headers: [["Content-Type", "application/json"]], body: JSON.stringify(body) })
  return { response, violations: violationsOf(model, BASE, { method: "POST", target: path, sent: JSON.stringify(body), response }) }
}

const expectHealthy = async (app: TestApp) => {
  const res = await send(app.url, { method: "GET", path: "/api/health" })
  expect(res.status, "health after the fault").toBe(200)
}

// ---- CoinGecko × exchange rates --------------------------------------------------------------

describe("CoinGecko fault modes × the upstream calls behind POST /api/v1/exchange-rates", () => {
  let emulator: CoinGeckoEmulator
  let app: TestApp
  let model: OpenApiModel
  beforeAll(async () => {
    emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
    const rates = Rates.layerTest({ env: {
      COINGECKO_BASE_URL: emulator.url,
      COINGECKO_TIMEOUT_MS: "300",
      COINGECKO_REQUEST_BUDGET_MS: "1500",
      COINGECKO_RETRIES: "1",
      COINGECKO_RETRY_BASE_MS: "50",
      // The breaker would open during the matrix and turn later cases into 503s.
      COINGECKO_BREAKER_FAILURES: "1000",
      COINGECKO_CALLS_PER_MIN: "10000",
      COINGECKO_LATEST_TTL_S: "1",
      COINGECKO_CALLS_PER_MONTH: PLENTY,
      COINGECKO_DEFAULT_RETRY_AFTER_S: "1"
    } })
    app = await startTestApp({ rates })
    model = loadOpenApi(await (await fetch(`${app.url}/openapi.json`)).json())
    // Warm the currency list (cached a day) so every case below exercises only the call it faults.
    expect((await post(app, model, "/api/v1/exchange-rates", { cryptos: ["BTC"], currency: "usd", days: 7 })).response.status).toBe(200)
  })
  afterAll(async () => {
    await app?.close()
    await emulator?.close()
  })

  // Fresh coin × currency pairs, one per case, so that no cache or last-good copy answers for the upstream.
  const coins = ["ETH", "SOL", "XRP", "DOGE", "ADA", "TRX", "AVAX", "DOT", "LINK", "LTC", "UNI", "NEAR", "XLM", "ATOM", "FIL"]
  const currencies = ["eur", "gbp", "jpy", "chf", "cad", "aud", "cny", "inr", "brl", "krw"]
  let nextPair = 0
  const freshPair = () => {
    const i = nextPair++
    return { symbol: coins[i % coins.length]!, currency: currencies[Math.floor(i / coins.length) % currencies.length]! }
  }
  const coinIds: Record<string, string> = {
    ETH: "ethereum", SOL: "solana", XRP: "ripple", DOGE: "dogecoin", ADA: "cardano", TRX: "tron", AVAX: "avalanche-2",
    DOT: "polkadot", LINK: "chainlink", LTC: "litecoin", UNI: "uniswap", NEAR: "near", XLM: "stellar", ATOM: "cosmos", FIL: "filecoin"
  }

  const modes: ReadonlyArray<Exclude<CoinGeckoFault, "none">> = ["5xx", "hang", "reset", "truncated", "wrong-shape", "401", "429", "429-no-retry-after", "429-html"]
  const isRateLimit = (mode: CoinGeckoFault) => mode.startsWith("429")
  const upstreamFailure = (mode: CoinGeckoFault) =>
    isRateLimit(mode) ? { status: 503, code: "service_unavailable" } : { status: 502, code: "upstream_error" }

  // Symbols resolve from the coin index, loaded in the background: no call on the request path
  // (its faults: test/integration/e2e/rates-abuse.test.ts).
  type UpstreamCall = "latest prices" | "daily series"
  const calls: ReadonlyArray<UpstreamCall> = ["latest prices", "daily series"]
  const matrix = calls.flatMap((call) => modes.map((mode) => [call, mode] as const))

  it.each(matrix)("%s × %s", async (call, mode) => {
    const { symbol, currency } = freshPair()
    const body = { cryptos: [symbol], currency, days: 7 }
    const paths = call === "latest prices" ? ["/coins/markets"] : [`/coins/${coinIds[symbol]}/market_chart`]
    emulator.setFault({ mode, paths, retryAfterSeconds: 1 })
    const started = performance.now()
    const checked = await post(app, model, "/api/v1/exchange-rates", body)
    const elapsed = performance.now() - started
    emulator.setFault("none")
    const context = `${call} × ${mode}: ${JSON.stringify(body)}`
    expectNoViolations(checked, context)
    expect(elapsed, `${context}: answered in ${Math.round(elapsed)} ms`).toBeLessThan(RATES_BOUND_MS)
    const res = checked.response
    const json = jsonOf(res)
    if (call === "latest prices") {
      // Latest prices are a nicety: the last daily close stands in, flagged stale. Only a 429 cool-down
      // that starts before the series call goes out can fail the whole request.
      if (isRateLimit(mode) && res.status === 503) expect(json.code, context).toBe("service_unavailable")
      else {
        expect(res.status, context).toBe(200)
        expect(json.stale, context).toBe(true)
        expect(json.rates[0].price, context).toBe(json.rates[0].series.at(-1)[1])
      }
    } else {
      const expected = upstreamFailure(mode)
      expect(res.status, context).toBe(expected.status)
      expect(json.code, context).toBe(expected.code)
      if (expected.status === 503) expect(Number(res.headers["retry-after"]), context).toBeGreaterThanOrEqual(1)
    }
    if (isRateLimit(mode)) await new Promise((r) => setTimeout(r, 1_100)) // let the 429 cool-down pass
    await expectHealthy(app)
  }, 10_000)

  it.each(calls)("%s without a fault answers from the upstream", async (call) => {
    const body = { cryptos: [call === "latest prices" ? "PEPE" : freshPair().symbol], currency: "usd", days: 7 }
    const checked = await post(app, model, "/api/v1/exchange-rates", body)
    expectNoViolations(checked, call)
    expect(checked.response.status).toBe(200)
    expect(jsonOf(checked.response).stale).toBe(false)
  })
})

// ---- Brevo and Listmonk × subscribe ------------------------------------------------------------

const newsletterEnv = { NEWSLETTER_TIMEOUT_MS: "300", NEWSLETTER_DEADLINE_MS: "1200", NEWSLETTER_RETRIES: "1" }
const live = (env: Record<string, string>) =>
  Newsletters.layer.pipe(Layer.provide(upstreamHttp), Layer.provide(configFrom({ ...newsletterEnv, ...env })))

type NewsletterCase = readonly [mode: Exclude<NewsletterFault, "none">, times: number | undefined, delayMs: number | undefined, expected: 200 | 502]

/**
 * Persistent faults: every mode is a 502 upstream_error, "slow" only when slower than the attempt
 * timeout. One-off blips: a transient failure (5xx, hang, reset) is retried and succeeds; an answer
 * that is not transient (401, 403, 429, a bad body) is not retried.
 */
const newsletterCases: ReadonlyArray<NewsletterCase> = [
  ["500", undefined, undefined, 502],
  ["503", undefined, undefined, 502],
  ["429", undefined, undefined, 502],
  ["401", undefined, undefined, 502],
  ["403", undefined, undefined, 502],
  ["hang", undefined, undefined, 502],
  ["reset", undefined, undefined, 502],
  ["html", undefined, undefined, 502],
  ["garbage", undefined, undefined, 502],
  ["slow", undefined, 2_000, 502],
  ["slow", undefined, 50, 200],
  ["500", 1, undefined, 200],
  ["503", 1, undefined, 200],
  ["hang", 1, undefined, 200],
  ["reset", 1, undefined, 200],
  ["429", 1, undefined, 502],
  ["401", 1, undefined, 502],
  ["garbage", 1, undefined, 502]
]

const describeNewsletter = (
  name: "Brevo" | "Listmonk",
  start: () => Promise<{ app: TestApp; emulator: BrevoEmulator | ListmonkEmulator; delivered: (email: string) => boolean }>
) =>
  describe(`${name} fault modes × POST /api/subscribe`, () => {
    let app: TestApp
    let model: OpenApiModel
    let emulator: BrevoEmulator | ListmonkEmulator
    let delivered: (email: string) => boolean
    beforeAll(async () => {
      ;({ app, emulator, delivered } = await start())
      model = loadOpenApi(await (await fetch(`${app.url}/openapi.json`)).json())
    })
    afterAll(async () => {
      await app?.close()
      await emulator?.close()
    })

    let n = 0
    it.each(newsletterCases)("%s (times %s, delay %s ms) → %i", async (mode, times, delayMs, expected) => {
      const email = `fault.${name.toLowerCase()}.${mode}.${n++}@example.com`
      emulator.setFault({ mode, ...(times === undefined ? {} : { times }), ...(delayMs === undefined ? {} : { delayMs }) })
      const started = performance.now()
      const checked = await post(app, model, "/api/subscribe", { email, locale: "fr" })
      const elapsed = performance.now() - started
      emulator.setFault("none")
      const context = `${name} ${mode} ×${times ?? "∞"}: ${email}`
      expectNoViolations(checked, context)
      expect(elapsed, `${context}: answered in ${Math.round(elapsed)} ms`).toBeLessThan(NEWSLETTER_BOUND_MS)
      expect(checked.response.status, context).toBe(expected)
      if (expected === 200) {
        expect(jsonOf(checked.response), context).toEqual({ success: true })
        expect(delivered(email), `${context}: the provider holds the address`).toBe(true)
      } else {
        expect(jsonOf(checked.response).code, context).toBe("upstream_error")
      }
      await expectHealthy(app)
    }, 10_000)
  })

describeNewsletter("Brevo", async () => {
  const emulator = await startBrevoEmulator({ host: "127.0.0.1" })
  const app = await startTestApp({
    newsletter: live({
      ...brevoServiceEnv(emulator.url)
    })
  })
  return {
    app,
    emulator,
    delivered: (email) => {
      const contact = emulator.contacts().get(email.toLowerCase())
      return contact?.email === email && contact.attributes.LOCALE === "fr" && contact.templateId === 13
    }
  }
})

const listUuids = ["es", "en", "fr", "it", "pt"].map((l, i) => [l, `0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a7${i}`] as const)
describeNewsletter("Listmonk", async () => {
  const emulator = await startListmonkEmulator({ host: "127.0.0.1", lists: listUuids.map(([, u]) => u) })
  const app = await startTestApp({
    newsletter: live({
      NEWSLETTER_PROVIDER: "listmonk",
      LISTMONK_URL: emulator.origin,
      LISTMONK_LISTS: listUuids.map(([l, u]) => `${l}:${u}`).join(",")
    })
  })
  const frList = listUuids.find(([l]) => l === "fr")![1]
  return {
    app,
    emulator,
    delivered: (email) => emulator.subscribers().get(email.toLowerCase())?.lists.includes(frList) === true
  }
})
