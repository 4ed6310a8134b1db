/** Curated ticker → CoinGecko coin (CONTRACT C4): tickers are ambiguous upstream (ETH has dozens); others go to the symbol lookup. */

export interface CuratedCoin {
  /** CoinGecko coin id, e.g. "bitcoin". */
  readonly id: string
  /** Display name as CoinGecko spells it. */
  readonly name: string
}

const entries: ReadonlyArray<readonly [symbol: string, id: string, name: string]> = [
  ["BTC", "bitcoin", "Bitcoin"],
  // The native asset, never one of the bridged "ETH" tokens.
  ["ETH", "ethereum", "Ethereum"],
  ["USDT", "tether", "Tether"],
  ["BNB", "binancecoin", "BNB"],
  ["SOL", "solana", "Solana"],
  ["XRP", "ripple", "XRP"],
  ["USDC", "usd-coin", "USDC"],
  ["ADA", "cardano", "Cardano"],
  ["DOGE", "dogecoin", "Dogecoin"],
  ["TRX", "tron", "TRON"],
  ["TON", "the-open-network", "Toncoin"],
  ["DOT", "polkadot", "Polkadot"],
  ["LTC", "litecoin", "Litecoin"],
  ["LINK", "chainlink", "Chainlink"],
  ["AVAX", "avalanche-2", "Avalanche"],
  ["XLM", "stellar", "Stellar"],
  ["BCH", "bitcoin-cash", "Bitcoin Cash"],
  ["SHIB", "shiba-inu", "Shiba Inu"],
  ["DAI", "dai", "Dai"],
  ["WBTC", "wrapped-bitcoin", "Wrapped Bitcoin"],
  ["UNI", "uniswap", "Uniswap"],
  ["ATOM", "cosmos", "Cosmos Hub"],
  ["XMR", "monero", "Monero"],
  ["ETC", "ethereum-classic", "Ethereum Classic"],
  ["NEAR", "near", "NEAR Protocol"],
  ["APT", "aptos", "Aptos"],
  ["SUI", "sui", "Sui"],
  ["FIL", "filecoin", "Filecoin"],
  ["ICP", "internet-computer", "Internet Computer"],
  ["HBAR", "hedera-hashgraph", "Hedera"],
  ["ARB", "arbitrum", "Arbitrum"],
  ["OP", "optimism", "Optimism"],
  // Polygon's token after the MATIC migration.
  ["POL", "polygon-ecosystem-token", "POL (ex-MATIC)"],
  ["AAVE", "aave", "Aave"],
  ["ALGO", "algorand", "Algorand"],
  ["XTZ", "tezos", "Tezos"]
]

export const curatedCoins: ReadonlyMap<string, CuratedCoin> = new Map(
  entries.map(([symbol, id, name]) => [symbol, { id, name }] as const)
)

/** The curated coin for an upper-case ticker, if we decided it ourselves. */
export const curatedCoinFor = (symbol: string): CuratedCoin | undefined => curatedCoins.get(symbol.toUpperCase())
