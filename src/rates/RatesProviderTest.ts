/**
 * A deterministic in-memory `RatesProvider` for handler tests: no network, no clock, same answer every run.
 * Provide it as `RatesProvider.layerTest`.
 *
 * Knows BTC, ETH and SOL. Two magic symbols reach the error paths of the HTTP layer:
 *   - "DOWN" fails with RatesUpstreamError            → 502 upstream_error
 *   - "BUSY" fails with RatesUnavailableError (30 s)  → 503 service_unavailable, Retry-After: 30
 * Currencies: usd, eur, gbp, jpy; any other fails with UnsupportedCurrencyError.
 * Its answers never change, so they are fresh for ever (`freshUntil: Infinity`): a repeated query may
 * be answered from the answer memo.
 *
 * Imports nothing but types from RatesProvider.ts, which refers to it (no import cycle).
 */
import { Effect } from "effect"
import { type RatesError, RatesUnavailableError, RatesUpstreamError, UnsupportedCurrencyError } from "./errors.ts"
import type { RatesAnswer, RatesProvider, RatesQuery, RateSeries } from "./RatesProvider.ts"

const DAY_MS = 86_400_000

/** The fixed "now" of the fake: 2026-11-22T10:00:00Z. Its last daily point is 2026-11-22T00:00:00Z. */
export const TEST_AS_OF = "2026-11-22T10:00:00Z"
const LAST_DAY_MS = Date.UTC(2026, 10, 22)

export const testCoins: ReadonlyMap<string, { readonly id: string; readonly name: string; readonly basePriceUsd: number }> = new Map([
  ["BTC", { id: "bitcoin", name: "Bitcoin", basePriceUsd: 64_000 }],
  ["ETH", { id: "ethereum", name: "Ethereum", basePriceUsd: 3_200 }],
  ["SOL", { id: "solana", name: "Solana", basePriceUsd: 150 }]
])

export const testCurrencies: ReadonlyMap<string, number> = new Map([
  ["usd", 1],
  ["eur", 0.92],
  ["gbp", 0.79],
  ["jpy", 151]
])

/** Price of a test coin on day `dayIndex` (0 = the last daily point, 1 = the day before, ...). */
export const testPrice = (basePriceUsd: number, fx: number, dayIndex: number): number =>
  Math.round(basePriceUsd * fx * (1 + 0.01 * ((dayIndex * 7) % 11 - 5)) * 100) / 100

const rateFor = (symbol: string, query: RatesQuery, fx: number): RateSeries | undefined => {
  const coin = testCoins.get(symbol)
  if (coin === undefined) return undefined
  const series = Array.from({ length: query.days }, (_, i) => {
    const dayIndex = query.days - 1 - i
    return [LAST_DAY_MS - dayIndex * DAY_MS, testPrice(coin.basePriceUsd, fx, dayIndex)] as const
  })
  const price = Math.round(coin.basePriceUsd * fx * 1.005 * 100) / 100
  return {
    symbol,
    id: coin.id,
    name: coin.name,
    price,
    change: { "24h": 1.5, "7d": -2.25, "30d": 10 },
    series,
    source: "coingecko"
  }
}

/** The fake's service; `RatesProvider.layerTest` provides it. */
export const testRates: RatesProvider["Service"] = {
  historical: (query) =>
    Effect.suspend((): Effect.Effect<RatesAnswer, RatesError> => {
      if (query.symbols.includes("DOWN")) {
        return Effect.fail(new RatesUpstreamError({ reason: "test: upstream answered 500" }))
      }
      if (query.symbols.includes("BUSY")) {
        return Effect.fail(new RatesUnavailableError({ reason: "test: upstream rate-limited us", retryAfterSeconds: 30 }))
      }
      const currency = query.currency.toLowerCase()
      const fx = testCurrencies.get(currency)
      if (fx === undefined) return Effect.fail(new UnsupportedCurrencyError({ currency: query.currency }))
      const rates: Array<RateSeries> = []
      const unknown: Array<string> = []
      for (const symbol of query.symbols) {
        const rate = rateFor(symbol, query, fx)
        if (rate === undefined) unknown.push(symbol)
        else rates.push(rate)
      }
      return Effect.succeed({
        result: {
          currency: currency.toUpperCase(),
          days: query.days,
          interval: "daily",
          asOf: TEST_AS_OF,
          source: "coingecko",
          stale: false,
          rates,
          unknown,
          attribution: "Data provided by CoinGecko"
        },
        freshUntil: Number.POSITIVE_INFINITY
      })
    })
}
