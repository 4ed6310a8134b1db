/**
 * Step 2 of a `historical` call: symbols → coins, with no upstream call on the request path. The curated
 * map first (symbols.ts), then the coin index: the upstream's coin list (`/coins/list`) and ranks (the
 * top `COINGECKO_INDEX_RANK_PAGES` pages of `/coins/markets` by market cap), loaded in the background at
 * start and daily (auxiliary.ts). A ticker shared by several coins is the top-ranked one's (an unranked
 * coin loses to any ranked one, and to the coin listed before it); a ticker no coin has is `unknown`.
 */
import { Duration, Effect, Schema, type Scope } from "effect"
import { makeAuxiliary } from "./auxiliary.ts"
import type { CoinGeckoClientShape, ListedCoin, MarketRow } from "./CoinGeckoClient.ts"
import { CoinGeckoError } from "./coinGeckoResponses.ts"
import type { RatesCache } from "./RatesCache.ts"
import { RatesConfig } from "./RatesConfig.ts"
import { entryOf } from "./staleCache.ts"
import { curatedCoinFor } from "./symbols.ts"

export interface Coin {
  readonly id: string
  readonly name: string
}

/** Upper-case ticker → `[id, name]` of its coin. */
const CoinIndex = Schema.Record(Schema.String, Schema.Tuple([Schema.String, Schema.String]))
type CoinIndex = typeof CoinIndex.Type

/** Tickers a request can carry (api/schemas.ts), not longer than this: others are never asked for. */
const ASKABLE = /^[A-Za-z0-9._-]{1,40}$/
const PAGE_SIZE = 250

/** The index from the list and the ranked rows (best rank first within a page). */
export const buildCoinIndex = (listed: ReadonlyArray<ListedCoin>, ranked: ReadonlyArray<MarketRow>): CoinIndex => {
  const rankOf = new Map<string, number>()
  for (const row of ranked) if (!rankOf.has(row.id)) rankOf.set(row.id, row.market_cap_rank ?? Number.MAX_SAFE_INTEGER)
  const best = new Map<string, { readonly id: string; readonly name: string; readonly rank: number }>()
  for (const coin of [...ranked, ...listed]) {
    if (!ASKABLE.test(coin.symbol)) continue
    const symbol = coin.symbol.toUpperCase()
    const rank = rankOf.get(coin.id) ?? Number.POSITIVE_INFINITY
    const known = best.get(symbol)
    if (known === undefined || rank < known.rank) best.set(symbol, { id: coin.id, name: coin.name, rank })
  }
  const index: Record<string, readonly [string, string]> = {}
  for (const [symbol, coin] of best) index[symbol] = [coin.id, coin.name]
  return index
}

export interface Resolved {
  /** Every symbol asked, with its coin or null (unknown). */
  readonly coins: ReadonlyMap<string, Coin | null>
}

/** Fails (`unavailable`, a 503) only when an uncurated symbol is asked and no index was ever loaded. */
export type ResolveSymbols = (symbols: ReadonlyArray<string>, deadline: number) => Effect.Effect<Resolved, CoinGeckoError>

export const makeResolveSymbols = (
  upstream: CoinGeckoClientShape
): Effect.Effect<ResolveSymbols, never, RatesCache | RatesConfig | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* RatesConfig
    const ranks = Effect.gen(function*() {
      const rows: Array<MarketRow> = []
      for (let page = 1; page <= config.indexRankPages; page++) {
        const batch = yield* upstream.coinsByRank(page, PAGE_SIZE)
        rows.push(...batch)
        if (batch.length < PAGE_SIZE) break
      }
      return rows
    })
    const index = yield* makeAuxiliary({
      name: "coin index",
      key: "rates:v2:coin-index",
      entry: entryOf(CoinIndex),
      fetch: Effect.map(Effect.all([upstream.coinList, ranks]), ([listed, ranked]) => buildCoinIndex(listed, ranked)),
      refreshEvery: Duration.hours(24)
    })
    // Coins made once per index entry: the same objects for every request.
    const coinsOf = new WeakMap<object, Coin>()
    const coinOf = (entry: readonly [string, string]) => {
      let coin = coinsOf.get(entry)
      if (coin === undefined) coinsOf.set(entry, coin = Object.freeze({ id: entry[0], name: entry[1] }))
      return coin
    }

    return (symbols, deadline) =>
      Effect.gen(function*() {
        const coins = new Map<string, Coin | null>()
        let held: CoinIndex | undefined
        for (const symbol of symbols) {
          const curated = curatedCoinFor(symbol)
          if (curated !== undefined) {
            coins.set(symbol, curated)
            continue
          }
          held ??= yield* index.get(deadline)
          if (held === undefined) {
            return yield* Effect.fail(new CoinGeckoError({
              kind: "unavailable",
              detail: "the coin index is not loaded yet",
              retryAfterSeconds: yield* index.retryAfterSeconds
            }))
          }
          coins.set(symbol, Object.hasOwn(held, symbol) ? coinOf(held[symbol]!) : null)
        }
        return { coins }
      })
  })
