/** The ports of the use case (historicalRates.ts), one per step, each live Layer an adapter of one source; each takes all the coins at once. */
import { Context, Effect, Layer, type Result } from "effect"
import type { Served } from "./copies/entry.ts"
import type { DailyPoint } from "./dailySeries.ts"
import type { UnsupportedCurrencyError } from "./RatesProvider.ts"
import type { SourceError, SourceName } from "./upstream.ts"

export type { Served } from "./copies/entry.ts"

export interface Coin {
  readonly id: string
  readonly name: string
}
export interface Resolved {
  /** Every symbol asked, with its coin or null (unknown). */
  readonly coins: ReadonlyMap<string, Coin | null>
}

export class CoinDirectory extends Context.Service<CoinDirectory, {
  /** Fails for a code the source does not quote; waits at most until the `Spend` deadline (a list's first load). */
  readonly checkCurrency: (currency: string) => Effect.Effect<void, UnsupportedCurrencyError>
  /** Symbols → coins. Fails (`Unavailable`, a 503) only when a symbol needs a list never loaded. */
  readonly resolve: (symbols: ReadonlyArray<string>) => Effect.Effect<Resolved, SourceError>
}>()("app/rates/CoinDirectory") {}

/** Latest price and % changes of one coin in one currency; null when the source lists no market for it. */
export type Latest = {
  readonly name: string
  readonly price: number | null
  readonly change24h: number | null
  readonly change7d: number | null
  readonly change30d: number | null
} | null

export interface PricesFound {
  /** Per coin id; a missing id means "unavailable" (the source failed and no copy is held). */
  readonly latest: ReadonlyMap<string, Served<Latest>>
  /** The failure behind missing or stale entries, if the call failed. */
  readonly failure: SourceError | undefined
}

/** Which source a port's values come from, and how its answers credit it. */
export interface Sourcing {
  readonly source: SourceName
  readonly attribution: string
}

export class LatestPrices extends Context.Service<LatestPrices, Sourcing & {
  /** Paid and waited for as `Spend` says. Never fails: see `failure`. */
  readonly latest: (ids: ReadonlyArray<string>, currency: string) => Effect.Effect<PricesFound>
}>()("app/rates/LatestPrices") {}

/** A coin's price as a live source quotes it: its last trade, and the change over 24 hours in %. */
export interface LiveQuote {
  readonly price: number
  readonly change24h: number | null
}

export class LiveQuotes extends Context.Service<LiveQuotes, {
  /** Which source it is, and its attribution; none: no live quotes (`COINBASE_WS_URL=none`). */
  readonly sourcing: Sourcing | undefined
  /** The coins quoted live in `currency` (lower-case); one not quoted, or not had by the `Spend` deadline, is absent. Never fails. */
  readonly quotes: (coins: ReadonlyArray<WantedCoin>, currency: string) => Effect.Effect<ReadonlyMap<string, Served<LiveQuote>>>
}>()("app/rates/LiveQuotes") {
  static readonly layerNone: Layer.Layer<LiveQuotes> = Layer.succeed(LiveQuotes)({
    sourcing: undefined,
    quotes: () => Effect.succeed(new Map())
  })
}

/** Daily points `[00:00 UTC, price]`, oldest first, a year of them; null when the source has no such coin. */
export type Chart = ReadonlyArray<DailyPoint> | null

export class DailyPoints extends Context.Service<DailyPoints, Sourcing & {
  /** Paid and waited for as `Spend` says. */
  readonly series: (ids: ReadonlyArray<string>, currency: string) => Effect.Effect<ReadonlyMap<string, Result.Result<Served<Chart>, SourceError>>>
}>()("app/rates/DailyPoints") {}

export interface WantedCoin {
  readonly symbol: string
  readonly id: string
}

/** One coin as a second source serves it: whole, so that the rate names one source. */
export interface SecondRate {
  readonly name: string
  readonly price: number
  readonly change: { readonly "24h": number | null; readonly "7d": number | null; readonly "30d": number | null }
  /** The year of daily points `[00:00 UTC, price]`, oldest first: the caller keeps the last `days`. */
  readonly series: ReadonlyArray<DailyPoint>
  /** When its price was observed (epoch ms). */
  readonly asOf: number
  /** Until when an answer made of it may be repeated: short, so that the first source serves again soon. */
  readonly holdsUntil: number
}
export type SecondOutcome =
  | { readonly _tag: "Served"; readonly rate: SecondRate }
  | { readonly _tag: "Failed"; readonly error: SourceError }

export class SecondSource extends Context.Service<SecondSource, {
  /** Which source it is, and its attribution; none: the first source's failures reach the caller as they are. */
  readonly sourcing: Sourcing | undefined
  /** Per coin id, its rate in `currency` (lower-case) or why not (`NotFound`: not listed); waits until the `Spend` deadline. Never fails. */
  readonly ratesFor: (coins: ReadonlyArray<WantedCoin>, currency: string) => Effect.Effect<ReadonlyMap<string, SecondOutcome>>
}>()("app/rates/SecondSource") {
  /** No second source (`RATES_FALLBACK=none`). */
  static readonly layerNone: Layer.Layer<SecondSource> = Layer.succeed(SecondSource)({
    sourcing: undefined,
    ratesFor: () => Effect.succeed(new Map())
  })
}
