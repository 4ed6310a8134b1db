/**
 * Deterministic data of the Coinbase Exchange emulator, derived from the CoinGecko emulator's prices
 * (coingecko-data.ts) so that both sources tell the same story: a Coinbase price is CoinGecko's at the
 * same instant times a small deterministic spread (at most ±0.06 %), as two real venues differ.
 * Tests import these formulas to know the exact answers. Erasable TypeScript only: Node runs it directly.
 */
import { DAY_MS, emulatedPrice, startOfUtcDay } from "./coingecko-data.ts"

export interface EmulatedProduct {
  /** `BASE-QUOTE`, e.g. BTC-USD. */
  readonly id: string
  readonly base: string
  readonly quote: string
  /** The CoinGecko emulator's coin for `base`. */
  readonly coinId: string
  readonly status: "online" | "delisted"
  readonly tradingDisabled: boolean
  /** First day with candles (epoch ms, 00:00 UTC); undefined: long before any test looks. */
  readonly listedDaysBeforeNow?: number
}

/** Coins Coinbase lists in USD and EUR here, by ticker → the CoinGecko emulator's id. */
const majors: ReadonlyArray<readonly [string, string]> = [
  ["BTC", "bitcoin"],
  ["ETH", "ethereum"],
  ["SOL", "solana"],
  ["LTC", "litecoin"],
  ["XRP", "ripple"],
  ["DOGE", "dogecoin"],
  ["ADA", "cardano"],
  ["AVAX", "avalanche-2"],
  ["LINK", "chainlink"],
  ["DOT", "polkadot"],
  ["BCH", "bitcoin-cash"],
  ["UNI", "uniswap"],
  ["XLM", "stellar"],
  ["ATOM", "cosmos"],
  ["XTZ", "tezos"],
  ["AAVE", "aave"],
  ["FIL", "filecoin"],
  ["ALGO", "algorand"],
  ["ETC", "ethereum-classic"],
  ["NEAR", "near"]
]

const product = (base: string, quote: string, coinId: string, extra: Partial<EmulatedProduct> = {}): EmulatedProduct => ({
  id: `${base}-${quote}`,
  base,
  quote,
  coinId,
  status: "online",
  tradingDisabled: false,
  ...extra
})

export const emulatedProducts: ReadonlyArray<EmulatedProduct> = [
  ...majors.flatMap(([base, coinId]) => [
    product(base, "USD", coinId),
    // A recent listing: candles only for its last 100 days.
    product(base, "EUR", coinId, base === "NEAR" ? { listedDaysBeforeNow: 100 } : {})
  ]),
  product("BTC", "USDT", "bitcoin"),
  product("ETH", "USDT", "ethereum"),
  product("SOL", "USDT", "solana"),
  product("BTC", "USDC", "bitcoin"),
  product("ETH", "USDC", "ethereum"),
  product("USDT", "USD", "tether"),
  product("USDT", "EUR", "tether"),
  product("USDC", "EUR", "usd-coin"),
  // Listed by /products but not tradable: a client must not offer them.
  product("DAI", "USD", "dai", { status: "delisted", tradingDisabled: true }),
  product("XTZ", "USDT", "tezos", { tradingDisabled: true })
]

export const emulatedProductById: ReadonlyMap<string, EmulatedProduct> = new Map(emulatedProducts.map((p) => [p.id, p]))

/** A product as GET /products lists it. */
export const coinbaseProductRow = (id: string) => {
  const p = emulatedProductById.get(id)!
  return {
    id: p.id,
    base_currency: p.base,
    quote_currency: p.quote,
    quote_increment: "0.01",
    base_increment: "0.00000001",
    display_name: `${p.base}/${p.quote}`,
    min_market_funds: "1",
    margin_enabled: false,
    post_only: false,
    limit_only: false,
    cancel_only: false,
    status: p.status,
    status_message: "",
    trading_disabled: p.tradingDisabled,
    fx_stablecoin: p.quote === "USDT" || p.quote === "USDC",
    max_slippage_percentage: "0.03000000",
    auction_mode: false,
    high_bid_limit_percentage: ""
  }
}

/** The thin market of the set: some days have no trades, hence no candle. */
export const GAPPY_PRODUCT = "XTZ-EUR"

/** Whether a product traded on the day starting at `day`: XTZ-EUR skips every day whose index is 2 mod 5. */
export const tradedOn = (productId: string, day: number): boolean =>
  productId !== GAPPY_PRODUCT || Math.floor(day / DAY_MS) % 5 !== 2

/** FNV-1a, as coingecko-data.ts: a stable seed per product. */
const seedOf = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

/** The venue's spread against CoinGecko on the day of `epochMs`: -0.06 % … +0.06 % in steps of 0.02 %. */
export const coinbaseSpread = (productId: string, epochMs: number): number =>
  (((seedOf(productId) + Math.floor(epochMs / DAY_MS)) % 7) - 3) * 0.0002

/** CoinGecko's price of the base in the quote; stablecoin quotes through CoinGecko's USD price of the stablecoin. */
const referencePrice = (p: EmulatedProduct, epochMs: number): number => {
  const quote = p.quote.toLowerCase()
  if (quote === "usdt" || quote === "usdc") {
    return emulatedPrice(p.coinId, "usd", epochMs) / emulatedPrice(quote === "usdt" ? "tether" : "usd-coin", "usd", epochMs)
  }
  return emulatedPrice(p.coinId, quote, epochMs)
}

/** Price of a product at an instant, rounded to 10 significant digits (as a decimal string travels). */
export const coinbasePrice = (productId: string, epochMs: number): number => {
  const p = emulatedProductById.get(productId)
  if (p === undefined) throw new Error(`no emulated product ${productId}`)
  return Number((referencePrice(p, epochMs) * (1 + coinbaseSpread(productId, epochMs))).toPrecision(10))
}

/** How Coinbase writes a price: a decimal string, never an exponent. */
export const priceText = (price: number): string => {
  const text = String(price)
  return text.includes("e") ? price.toFixed(12).replace(/0+$/, "") : text
}

/**
 * What the REST ticker and stats and the feed's `ticker` messages say of a product at an instant, so that
 * they agree: the price, best bid and ask (±0.01 %), the price 24 h before (`open`), and the 24 h low and
 * high (of the prices 24 h and 12 h before, and now). Numbers; the wire writes them with `priceText`.
 */
export const coinbaseQuote = (productId: string, epochMs: number) => {
  const price = coinbasePrice(productId, epochMs)
  const open = coinbasePrice(productId, epochMs - DAY_MS)
  const middle = coinbasePrice(productId, epochMs - DAY_MS / 2)
  return {
    price,
    bid: Number((price * 0.9999).toPrecision(10)),
    ask: Number((price * 1.0001).toPrecision(10)),
    open,
    high: Math.max(open, middle, price),
    low: Math.min(open, middle, price)
  }
}

/** How Coinbase writes a time: ISO 8601 with microseconds (the emulator's are `ms` then `123`). */
export const coinbaseTime = (epochMs: number): string => new Date(epochMs).toISOString().replace("Z", "123Z")

/** `[time (s), low, high, open, close, volume]`. */
export type EmulatedCandle = [number, number, number, number, number, number]

/**
 * The candle of the bucket starting at `start` (ms), `granularityS` long, as seen at `now`: opens at the
 * price at its start, closes at the price at its end (or now, while it runs); undefined when no trade.
 */
export const coinbaseCandle = (productId: string, start: number, granularityS: number, now: number): EmulatedCandle | undefined => {
  const p = emulatedProductById.get(productId)
  if (p === undefined || start > now || !tradedOn(productId, startOfUtcDay(start))) return undefined
  if (p.listedDaysBeforeNow !== undefined && start < startOfUtcDay(now) - p.listedDaysBeforeNow * DAY_MS) return undefined
  const open = coinbasePrice(productId, start)
  const close = coinbasePrice(productId, Math.min(start + granularityS * 1000, now))
  const swing = 0.004 + (seedOf(`${productId}${start}`) % 100) / 10_000
  const high = Number((Math.max(open, close) * (1 + swing)).toPrecision(10))
  const low = Number((Math.min(open, close) * (1 - swing)).toPrecision(10))
  const volume = Number(((seedOf(`${productId}:${start}`) % 100_000) / 10 + 1).toFixed(8))
  return [start / 1000, low, high, open, close, volume]
}

/** The daily close of a product for the day starting at `day`, as seen at `now`; undefined on a day without trades. */
export const coinbaseDailyClose = (productId: string, day: number, now: number): number | undefined =>
  coinbaseCandle(productId, day, 86_400, now)?.[4]

export { DAY_MS, startOfUtcDay }
