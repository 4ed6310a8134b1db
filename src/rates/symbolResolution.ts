/**
 * Step 2 of a `historical` call: symbols → coins. The curated map first (symbols.ts), then the
 * upstream's lookup by ticker, top-ranked coin wins (cached a day, "no such coin" too; last good copies
 * when the upstream fails). The lookup's rows are also this moment's latest prices: they are kept.
 */
import { Clock, Duration, Effect, Option, Schema } from "effect"
import type { CoinGeckoClientShape, CoinGeckoError, MarketRow } from "./CoinGeckoClient.ts"
import { latestKey, toLatest } from "./marketData.ts"
import { entryOf, lastGoodKey, type StaleCache } from "./staleCache.ts"
import { curatedCoinFor } from "./symbols.ts"

const Coin = Schema.Struct({ id: Schema.String, name: Schema.String })
export type Coin = typeof Coin.Type

/** A symbol's resolution; null when the upstream knows no coin with that ticker. */
const resolutionEntry = entryOf(Schema.NullOr(Coin))

const symbolKey = (symbol: string) => `rates:cg:symbol:${symbol}`
const RESOLUTION_TTL = Duration.hours(24)

/** Of the coins sharing a ticker, the top-ranked one (an unranked coin loses to any ranked one). */
const topRanked = (rows: ReadonlyArray<MarketRow>, symbol: string): MarketRow | undefined => {
  let best: MarketRow | undefined
  for (const row of rows) {
    if (row.symbol.toLowerCase() !== symbol.toLowerCase()) continue
    const rank = row.market_cap_rank ?? Number.POSITIVE_INFINITY
    const bestRank = best?.market_cap_rank ?? Number.POSITIVE_INFINITY
    if (best === undefined || rank < bestRank) best = row
  }
  return best
}

export interface Resolved {
  /** Every symbol asked, with its coin or null (unknown). */
  readonly coins: ReadonlyMap<string, Coin | null>
  /** True when some resolution is a last good copy (the upstream lookup failed). */
  readonly stale: boolean
  /** When the first cached resolution used expires (epoch ms); Infinity when all are curated. */
  readonly freshUntil: number
}

/** Fails only when the upstream lookup failed and some symbol was never resolved before. */
export type ResolveSymbols = (symbols: ReadonlyArray<string>, currency: string, deadline: number) => Effect.Effect<Resolved, CoinGeckoError>

export const makeResolveSymbols = (
  cache: StaleCache,
  upstream: CoinGeckoClientShape,
  options: { readonly latestTtl: Duration.Duration }
): ResolveSymbols => {
  /** Looks up uncurated symbols in one upstream call; also keeps the rows as latest prices. */
  const lookUp = (symbols: ReadonlyArray<string>, currency: string): Effect.Effect<Map<string, Coin | null>, CoinGeckoError> =>
    Effect.gen(function*() {
      const rows = yield* upstream.marketsBySymbols(currency, symbols)
      const storedAt = yield* Clock.currentTimeMillis
      const found = new Map<string, Coin | null>()
      for (const symbol of symbols) {
        const row = topRanked(rows, symbol)
        const coin = row === undefined ? null : Object.freeze({ id: row.id, name: row.name })
        found.set(symbol, coin)
        yield* cache.write(symbolKey(symbol), coin, storedAt, RESOLUTION_TTL)
        if (row !== undefined) yield* cache.write(latestKey(currency, row.id), toLatest(row), storedAt, options.latestTtl)
      }
      return found
    })

  return (symbols, currency, deadline) =>
    Effect.gen(function*() {
      const coins = new Map<string, Coin | null>()
      let stale = false
      let freshUntil = Number.POSITIVE_INFINITY
      const toLookUp: Array<string> = []
      for (const symbol of symbols) {
        const curated = curatedCoinFor(symbol)
        if (curated !== undefined) {
          coins.set(symbol, curated)
          continue
        }
        const hit = yield* cache.read(resolutionEntry, symbolKey(symbol))
        if (Option.isSome(hit)) {
          coins.set(symbol, hit.value.value)
          freshUntil = Math.min(freshUntil, hit.value.storedAt + Duration.toMillis(RESOLUTION_TTL))
        } else toLookUp.push(symbol)
      }
      if (toLookUp.length === 0) return { coins, stale, freshUntil }
      // Looked up now: stored after this instant, for a day.
      freshUntil = Math.min(freshUntil, (yield* Clock.currentTimeMillis) + Duration.toMillis(RESOLUTION_TTL))

      const batch = [...toLookUp].sort()
      const looked = yield* cache.shared(`lookup:${currency}:${batch.join(",")}`, Effect.suspend(() => lookUp(batch, currency)), deadline).pipe(
        Effect.result
      )
      if (looked._tag === "Success") {
        for (const symbol of toLookUp) coins.set(symbol, looked.success.get(symbol) ?? null)
        return { coins, stale, freshUntil }
      }
      // Upstream failed: use old resolutions; a symbol we never resolved cannot be answered.
      for (const symbol of toLookUp) {
        const copy = yield* cache.read(resolutionEntry, lastGoodKey(symbolKey(symbol)))
        if (Option.isNone(copy)) return yield* Effect.fail(looked.failure)
        coins.set(symbol, copy.value.value)
        stale = true
      }
      return { coins, stale, freshUntil }
    })
}
