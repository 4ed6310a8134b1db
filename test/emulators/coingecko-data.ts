/**
 * Deterministic data of the CoinGecko emulator. Tests import the same formulas to know the exact
 * answers the emulator gives. Plain TypeScript with erasable syntax only: Node runs it directly.
 */

export const DAY_MS = 86_400_000

export interface EmulatedCoin {
  readonly id: string
  /** Lower-case, as CoinGecko spells symbols. */
  readonly symbol: string
  readonly name: string
  /** Market-cap rank; null for unranked coins. */
  readonly rank: number | null
  readonly basePriceUsd: number
  /** Amplitude of the price wave, as a fraction of the base price. */
  readonly volatility: number
  /** Listed in /coins/markets, but /coins/{id}/market_chart answers 404 (a delisted coin's chart). */
  readonly chartMissing?: boolean
}

const coin = (id: string, symbol: string, name: string, rank: number | null, basePriceUsd: number, volatility = 0.08): EmulatedCoin => ({
  id,
  symbol,
  name,
  rank,
  basePriceUsd,
  volatility
})

export const emulatedCoins: ReadonlyArray<EmulatedCoin> = [
  coin("bitcoin", "btc", "Bitcoin", 1, 64_000),
  coin("ethereum", "eth", "Ethereum", 2, 3_200, 0.1),
  coin("tether", "usdt", "Tether", 3, 1, 0.001),
  coin("binancecoin", "bnb", "BNB", 4, 580),
  coin("solana", "sol", "Solana", 5, 150, 0.15),
  coin("usd-coin", "usdc", "USDC", 6, 1, 0.001),
  coin("ripple", "xrp", "XRP", 7, 0.52),
  coin("dogecoin", "doge", "Dogecoin", 8, 0.12, 0.2),
  coin("the-open-network", "ton", "Toncoin", 9, 5.4),
  coin("cardano", "ada", "Cardano", 10, 0.45),
  coin("tron", "trx", "TRON", 11, 0.12),
  coin("avalanche-2", "avax", "Avalanche", 12, 28),
  coin("shiba-inu", "shib", "Shiba Inu", 13, 0.0000175, 0.2),
  coin("wrapped-bitcoin", "wbtc", "Wrapped Bitcoin", 14, 64_000),
  coin("polkadot", "dot", "Polkadot", 15, 6.2),
  coin("chainlink", "link", "Chainlink", 16, 13.5),
  coin("bitcoin-cash", "bch", "Bitcoin Cash", 17, 380),
  coin("near", "near", "NEAR Protocol", 18, 5.1),
  coin("dai", "dai", "Dai", 19, 1, 0.001),
  coin("litecoin", "ltc", "Litecoin", 20, 72),
  coin("uniswap", "uni", "Uniswap", 21, 7.4),
  coin("sui", "sui", "Sui", 22, 1.1, 0.15),
  coin("internet-computer", "icp", "Internet Computer", 23, 8.9),
  coin("aptos", "apt", "Aptos", 26, 6.8),
  coin("monero", "xmr", "Monero", 27, 160),
  coin("ethereum-classic", "etc", "Ethereum Classic", 28, 21),
  coin("stellar", "xlm", "Stellar", 29, 0.1),
  coin("hedera-hashgraph", "hbar", "Hedera", 30, 0.07),
  coin("cosmos", "atom", "Cosmos Hub", 31, 6.5),
  coin("filecoin", "fil", "Filecoin", 32, 4.3),
  coin("arbitrum", "arb", "Arbitrum", 33, 0.75),
  coin("optimism", "op", "Optimism", 34, 1.6),
  coin("polygon-ecosystem-token", "pol", "POL (ex-MATIC)", 35, 0.38),
  coin("aave", "aave", "Aave", 36, 140),
  coin("algorand", "algo", "Algorand", 37, 0.14),
  coin("tezos", "xtz", "Tezos", 38, 0.7),
  // Only reachable through the symbol lookup: not in the curated map.
  coin("pepe", "pepe", "Pepe", 24, 0.0000089, 0.25),
  coin("render-token", "render", "Render", 39, 5.2),
  // A ticker shared by several coins: the top-ranked (holotoken) must win.
  coin("hot-cross", "hot", "Hot Cross", 1_412, 0.0021, 0.2),
  coin("holotoken", "hot", "Holo", 141, 0.0018),
  coin("hot-dog-coin", "hot", "HotDog", null, 0.00001, 0.3),
  // A bridged copy sharing ETH's ticker; a naive lookup would be fooled by it.
  coin("ethereum-wormhole", "eth", "Ethereum (Wormhole)", 1_905, 3_190, 0.1),
  coin("ghost-coin", "ghost", "Ghost", 902, 0.33, 0.1)
].map((c) => (c.id === "ghost-coin" ? { ...c, chartMissing: true } : c))

export const emulatedCoinById: ReadonlyMap<string, EmulatedCoin> = new Map(emulatedCoins.map((c) => [c.id, c]))

/** vs_currency → units of that currency per USD (fixed, so answers are reproducible). */
export const emulatedCurrencies: ReadonlyMap<string, number> = new Map([
  ["usd", 1],
  ["eur", 0.92],
  ["gbp", 0.79],
  ["jpy", 151.2],
  ["chf", 0.88],
  ["cad", 1.36],
  ["aud", 1.52],
  ["cny", 7.24],
  ["inr", 83.4],
  ["brl", 5.05],
  ["krw", 1_370],
  ["btc", 1 / 64_000],
  ["eth", 1 / 3_200]
])

/** FNV-1a: a stable 32-bit seed per coin id. */
const seedOf = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

/**
 * Price of a coin in a currency at an instant: two slow waves around the base price, phase-shifted
 * per coin, rounded to 10 significant digits. Continuous in time, so "now" and daily closes differ.
 */
export const emulatedPrice = (coinId: string, currency: string, epochMs: number): number => {
  const c = emulatedCoinById.get(coinId)
  const fx = emulatedCurrencies.get(currency)
  if (c === undefined || fx === undefined) throw new Error(`no emulated price for ${coinId}/${currency}`)
  const seed = seedOf(c.id)
  const phase = ((seed % 1000) / 1000) * 2 * Math.PI
  const days = epochMs / DAY_MS
  const wave = Math.sin(days / 9 + phase) * 0.7 + Math.sin(days / 2.3 + phase * 3) * 0.3
  return Number((c.basePriceUsd * fx * (1 + c.volatility * wave)).toPrecision(10))
}

/** % change over the last `hours`, as /coins/markets reports it. */
export const emulatedChange = (coinId: string, currency: string, now: number, hours: number): number => {
  const then = emulatedPrice(coinId, currency, now - hours * 3_600_000)
  const current = emulatedPrice(coinId, currency, now)
  return Number((((current - then) / then) * 100).toPrecision(8))
}

/** 00:00 UTC of the day containing `epochMs`. */
export const startOfUtcDay = (epochMs: number): number => Math.floor(epochMs / DAY_MS) * DAY_MS

/**
 * `market_chart?interval=daily` prices: `days` points at 00:00 UTC ending with today's, then "now",
 * like the real API (whose last point is the current price, not a daily close).
 */
export const emulatedDailyPrices = (coinId: string, currency: string, days: number, now: number): Array<[number, number]> => {
  const today = startOfUtcDay(now)
  const points: Array<[number, number]> = []
  for (let k = days - 1; k >= 0; k--) {
    const t = today - k * DAY_MS
    points.push([t, emulatedPrice(coinId, currency, t)])
  }
  points.push([now, emulatedPrice(coinId, currency, now)])
  return points
}

/** The coin a ticker lookup (`include_tokens=top`) answers: the best-ranked, unranked last. */
export const topRankedBySymbol = (symbol: string): EmulatedCoin | undefined =>
  [...emulatedCoins]
    .filter((c) => c.symbol === symbol.toLowerCase())
    .sort((a, b) => (a.rank ?? Number.POSITIVE_INFINITY) - (b.rank ?? Number.POSITIVE_INFINITY))[0]
