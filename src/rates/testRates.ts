/** Data of the fake `RatesProvider.layerTest`: BTC, ETH, SOL in usd, eur, gbp, jpy (else 400); "DOWN" → 502, "BUSY" → 503 (30 s). */
import { DAY_MS } from "./dailySeries.ts"

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
const testPrice = (basePriceUsd: number, fx: number, dayIndex: number): number =>
  Math.round(basePriceUsd * fx * (1 + 0.01 * ((dayIndex * 7) % 11 - 5)) * 100) / 100

const rateFor = (symbol: string, days: number, fx: number) => {
  const coin = testCoins.get(symbol)
  if (coin === undefined) return undefined
  const series = Array.from({ length: days }, (_, i) => {
    const dayIndex = days - 1 - i
    return [LAST_DAY_MS - dayIndex * DAY_MS, testPrice(coin.basePriceUsd, fx, dayIndex)] as const
  })
  return {
    symbol,
    id: coin.id,
    name: coin.name,
    price: Math.round(coin.basePriceUsd * fx * 1.005 * 100) / 100,
    change: { "24h": 1.5, "7d": -2.25, "30d": 10 },
    series,
    source: "coingecko" as const,
    sources: { price: "coingecko" as const, series: "coingecko" as const },
    asOf: TEST_AS_OF
  }
}

export const testAnswer = (query: { readonly symbols: ReadonlyArray<string>; readonly currency: string; readonly days: number }) => {
  if (query.symbols.includes("DOWN")) return { _tag: "Down" } as const
  if (query.symbols.includes("BUSY")) return { _tag: "Busy" } as const
  const currency = query.currency.toLowerCase()
  const fx = testCurrencies.get(currency)
  if (fx === undefined) return { _tag: "UnknownCurrency" } as const
  const rates: Array<NonNullable<ReturnType<typeof rateFor>>> = []
  const unknown: Array<string> = []
  for (const symbol of query.symbols) {
    const rate = rateFor(symbol, query.days, fx)
    if (rate === undefined) unknown.push(symbol)
    else rates.push(rate)
  }
  return {
    _tag: "Answer",
    result: {
      currency: currency.toUpperCase(),
      days: query.days,
      interval: "daily" as const,
      asOf: TEST_AS_OF,
      source: "coingecko" as const,
      stale: false,
      rates,
      unknown,
      attribution: "Data provided by CoinGecko"
    }
  } as const
}
