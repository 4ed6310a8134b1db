/**
 * `CoinDirectory` served by CoinGecko, no upstream call on the request path (CONTRACT C4): currencies, then symbols
 * by the curated map (symbols.ts) and the coin index (`/coins/list`, ranked by `/coins/markets`). The three lists
 * are held apart (copies/Copies.ts `makeHeldList`), each on its own, loaded at start and then daily on its schedule.
 */
import { Effect, Layer, Option, Schema } from "effect"
import type { CopyStore } from "../copies/CopyStore.ts"
import { makeHeldList } from "../copies/Copies.ts"
import { type Coin, CoinDirectory } from "../ports.ts"
import { UnsupportedCurrencyError } from "../RatesProvider.ts"
import { curatedCoins } from "../symbols.ts"
import type { SourceError } from "../upstream.ts"
import { CoinGeckoClient } from "./CoinGeckoClient.ts"
import { CoinGeckoConfig } from "./CoinGeckoConfig.ts"

/** CoinGecko's list in 2026, lower-case. */
const RELEASE_CURRENCIES: ReadonlyArray<string> = [
  "btc", "eth", "ltc", "bch", "bnb", "eos", "xrp", "xlm", "link", "dot", "yfi", "sol", "usd", "aed", "ars", "aud", "bdt", "bhd",
  "bmd", "brl", "cad", "chf", "clp", "cny", "czk", "dkk", "eur", "gbp", "gel", "hkd", "huf", "idr", "ils", "inr", "jpy", "krw",
  "kwd", "lkr", "mmk", "mxn", "myr", "ngn", "nok", "nzd", "php", "pkr", "pln", "rub", "sar", "sek", "sgd", "thb", "try", "twd",
  "uah", "vef", "vnd", "zar", "xdr", "xag", "xau", "bits", "sats"
]

/** Upper-case ticker → `[id, name]` of its coin. */
type CoinIndex = Readonly<Record<string, readonly [string, string]>>
/** What the index reads of the coin list and of the ranked rows. */
const Coins = Schema.Array(Schema.Struct({ id: Schema.String, symbol: Schema.String, name: Schema.String }))
const Ranked = Schema.Array(Schema.Struct({ id: Schema.String, symbol: Schema.String, name: Schema.String, market_cap_rank: Schema.optional(Schema.NullOr(Schema.Finite)) }))
type Coins = typeof Coins.Type
type Ranked = typeof Ranked.Type

/** Tickers a request can carry (api/schemas.ts), not longer than this: others are never asked for. */
const ASKABLE = /^[A-Za-z0-9._-]{1,40}$/
const PAGE_SIZE = 250
const CURRENCIES = "rates:v2:currencies"
const COIN_LIST = "rates:v2:coin-list"
const COIN_RANKS = "rates:v2:coin-ranks"
/** Instances sharing a list reload a little apart, so one fetches and the others adopt its copy. */
const RELOAD_SPREAD_MS = 5 * 60_000
/** A list never loaded is retried at least this often: it loads within minutes of CoinGecko answering again. */
const NONE_HELD_RETRY_MAX_MS = 2 * 60_000

/** The index from the list and the ranked rows (best rank first within a page). */
const buildCoinIndex = (listed: Coins, ranked: Ranked): CoinIndex => {
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

const makeDirectory = Effect.gen(function*() {
  const config = yield* CoinGeckoConfig
  const client = yield* CoinGeckoClient
  // Reloaded once a day; a list held is served while it is reloaded.
  const list = <A, I>(name: string, key: string, value: Schema.Codec<A, I>, load: Effect.Effect<A, SourceError>) =>
    makeHeldList<A, I>({
      name,
      source: "coingecko",
      key,
      value,
      load,
      reload: { everyMs: 24 * 3_600_000, spreadMs: RELOAD_SPREAD_MS, lastGoodMs: config.staleTtlHours * 3_600_000 },
      retry: { firstMs: config.auxiliaryRetryMs, maxMsWhileNoneHeld: Math.max(config.auxiliaryRetryMs, NONE_HELD_RETRY_MAX_MS) }
    })

  const currencies = yield* list(
    "currency list",
    CURRENCIES,
    Schema.Array(Schema.String),
    Effect.map(client.supportedCurrencies, (codes) => codes.map((code) => code.toLowerCase()))
  )
  const coins = yield* list("coin list", COIN_LIST, Coins, Effect.map(client.coinList, (listed) => listed.map(({ id, name, symbol }) => ({ id, name, symbol }))))
  const ranks = yield* list(
    "coin rank list",
    COIN_RANKS,
    Ranked,
    Effect.map(client.coinRanks(config.indexRankPages, PAGE_SIZE), (rows) => rows.map(({ id, market_cap_rank, name, symbol }) => ({ id, market_cap_rank, name, symbol })))
  )
  // The first loads, one after the other (a refusal, a 429 or no credits, stops the next before it calls); then each on its schedule.
  yield* Effect.forkScoped(Effect.andThen(
    Effect.forEach([currencies.warm, coins.warm, ranks.warm], (warm) => Effect.andThen(warm, Effect.yieldNow)),
    Effect.all([currencies.reloads, coins.reloads, ranks.reloads], { concurrency: "unbounded" })
  ))

  /** The index of the two lists held: built once per pair of copies. */
  const indexes = new WeakMap<Coins, WeakMap<Ranked, CoinIndex>>()
  const indexOf = (listed: Coins, ranked: Ranked) => {
    const byRanks = indexes.get(listed) ?? new WeakMap<Ranked, CoinIndex>()
    indexes.set(listed, byRanks)
    let index = byRanks.get(ranked)
    if (index === undefined) byRanks.set(ranked, index = buildCoinIndex(listed, ranked))
    return index
  }
  const index = Effect.all([coins.get, ranks.get], { concurrency: 2 }).pipe(Effect.map(([listed, ranked]) => indexOf(listed, ranked)))

  // One Set per list held, built on its first use; coins made once per index entry.
  const sets = new WeakMap<ReadonlyArray<string>, ReadonlySet<string>>()
  const setOf = (codes: ReadonlyArray<string>) => {
    let set = sets.get(codes)
    if (set === undefined) sets.set(codes, set = new Set(codes))
    return set
  }
  const coinsOf = new WeakMap<object, Coin>()
  const coinOf = (entry: readonly [string, string]) => {
    let coin = coinsOf.get(entry)
    if (coin === undefined) coinsOf.set(entry, coin = Object.freeze({ id: entry[0], name: entry[1] }))
    return coin
  }

  return CoinDirectory.of({
    checkCurrency: (currency) =>
      Effect.gen(function*() {
        const held = yield* Effect.option(currencies.get)
        const codes = Option.isSome(held) ? held.value : RELEASE_CURRENCIES
        if (!setOf(codes).has(currency)) return yield* Effect.fail(new UnsupportedCurrencyError({ currency }))
      }),
    resolve: (symbols) =>
      Effect.gen(function*() {
        const coins = new Map<string, Coin | null>()
        let held: CoinIndex | undefined
        for (const symbol of symbols) {
          const curated = curatedCoins.get(symbol.toUpperCase())
          if (curated !== undefined) {
            coins.set(symbol, curated)
            continue
          }
          held ??= yield* index
          coins.set(symbol, Object.hasOwn(held, symbol) ? coinOf(held[symbol]!) : null)
        }
        return { coins }
      })
  })
})

export const layer: Layer.Layer<CoinDirectory, never, CoinGeckoClient | CoinGeckoConfig | CopyStore> = Layer.effect(CoinDirectory, makeDirectory)
