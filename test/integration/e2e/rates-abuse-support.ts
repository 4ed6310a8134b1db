/**
 * Shared set-up of the rates abuse tests (issue 13): the whole app over a socket with the live CoinGecko
 * Layer against the emulator, callers told apart by X-Forwarded-For (TRUST_PROXY), and junk requests.
 */
import { Layer } from "effect"
import type { CoinGeckoEmulator } from "../../emulators/coingecko.ts"
import type { RatesProvider } from "../../../src/rates/RatesProvider.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import type { Env } from "../../support/config.ts"
import * as Rates from "../../../src/rates/layer.ts"

/** The live provider with the production defaults, but for `env`. */
const liveRatesLayer = (emulator: CoinGeckoEmulator, env: Env = {}): Layer.Layer<RatesProvider, unknown> =>
  Rates.layerTest({ env: { COINGECKO_BASE_URL: emulator.url, ...env } })

/** The app (callers told apart by X-Forwarded-For) over the live provider. */
export const startRatesApp = (emulator: CoinGeckoEmulator, env: Env = {}, rates = liveRatesLayer(emulator, env)): Promise<TestApp> =>
  startTestApp({ env: { TRUST_PROXY: "true" }, rates })

export interface Answered {
  readonly status: number
  readonly ms: number
  readonly retryAfter: string | null
  readonly body: Record<string, unknown>
}

/** POST /api/v1/exchange-rates from the address `from`. */
export const askFrom = async (app: TestApp, from: string, body: unknown): Promise<Answered> => {
  const started = performance.now()
  const res = await fetch(`${app.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": from },
    body: JSON.stringify(body)
  })
  const json = (await res.json()) as Record<string, unknown>
  return { status: res.status, ms: performance.now() - started, retryAfter: res.headers.get("retry-after"), body: json }
}

let junkSerial = 0
/** 50 tickers no coin has, never sent before. */
export const junkSymbols = (): Array<string> => {
  const serial = junkSerial++
  return Array.from({ length: 50 }, (_, i) => `QZ${serial}X${i}`)
}

/** `count` junk requests from `from`, in sequence; their statuses. */
export const sendJunk = async (app: TestApp, from: string, count: number): Promise<Array<number>> => {
  const statuses: Array<number> = []
  for (let i = 0; i < count; i++) statuses.push((await askFrom(app, from, { cryptos: junkSymbols(), days: 30 })).status)
  return statuses
}

/** Requests that vary only in shape over two coins already asked: days, currency, order, spelling. */
export const shapeCycling = (count: number) => {
  const days = [1, 2, 7, 14, 29, 30, 31, 60, 90, 91, 180, 200, 364, 365]
  const currencies = ["usd", "USD", "Usd", "eur", "gbp", "jpy", "chf", "cad", "aud", "cny", "inr", "brl", "krw"]
  const orders = [["BTC", "ETH"], ["eth", "btc"], ["Btc", "eTh", "BTC"]]
  return Array.from({ length: count }, (_, i) => ({
    cryptos: orders[i % orders.length],
    currency: currencies[i % currencies.length],
    days: days[i % days.length]
  }))
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` every 50 ms until it holds or `timeoutMs` passed; true when it held. */
export const eventually = async (check: () => boolean, timeoutMs = 5_000): Promise<boolean> => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    if (check()) return true
    await sleep(50)
  }
  return check()
}
