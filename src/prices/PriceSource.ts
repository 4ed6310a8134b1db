/**
 * The port the price stream reads (C10): the prices the rates capability holds now, answered by it (its
 * `latestPrices`, wired at the top in src/server.ts), so that src/prices never imports src/rates.
 */
import { Context, type Effect } from "effect"

/** A price held now; `at` when it was observed (epoch ms). */
export interface HeldPrice {
  readonly price: number
  readonly change24h: number | null
  readonly at: number
  readonly source: "coinbase" | "coingecko"
}

export interface HeldPrices {
  /** Per symbol held now; a known symbol not held yet is absent. */
  readonly prices: ReadonlyMap<string, HeldPrice>
  readonly unknown: ReadonlyArray<string>
}

/** Why the prices could not be read: the rates capability's errors, by tag. */
export type PriceSourceError =
  | { readonly _tag: "RatesUpstreamError" }
  | { readonly _tag: "RatesUnavailableError"; readonly retryAfterSeconds: number }
  | { readonly _tag: "UnsupportedCurrencyError"; readonly currency: string }

export class PriceSource extends Context.Service<PriceSource, {
  /** In-memory reads once the lists are loaded; `caller` given: noted once in the demand (a stream's opening). */
  readonly latest: (query: {
    readonly symbols: ReadonlyArray<string>
    readonly currency: string
    readonly caller?: string | undefined
  }) => Effect.Effect<HeldPrices, PriceSourceError>
}>()("app/prices/PriceSource") {}
