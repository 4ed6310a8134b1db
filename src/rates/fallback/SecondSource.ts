/**
 * The second rates source (CONTRACT C4, "Second source"): what CoinGeckoRates.ts asks for the coins
 * CoinGecko cannot serve right now (credits or pace spent, 429, outage, breaker open) with no fresh
 * copy held. Its tag, types and the implementation that serves nothing live here; Coinbase's is
 * coinbaseRates.ts, and layer.ts chooses between them (`RATES_FALLBACK`).
 *
 * A rate from it is whole (price, changes and series of one source), so that each rate of an answer
 * names one `source`.
 */
import { Context, Effect, Layer } from "effect"
import type { DailyPoint } from "../dailySeries.ts"
import type { CoinbaseError } from "../coinbase/coinbaseResponses.ts"

export type RateSource = "coingecko" | "coinbase"

/** One coin as the second source serves it. */
export interface SecondRate {
  readonly name: string
  readonly price: number
  readonly change: { readonly "24h": number | null; readonly "7d": number | null; readonly "30d": number | null }
  /** The year of daily points `[00:00 UTC, price]`, oldest first: the caller keeps the last `days`. */
  readonly series: ReadonlyArray<DailyPoint>
  /** When its price was observed (epoch ms). */
  readonly asOf: number
  /**
   * Until when an answer made of it may be repeated: short, so that an answer falls back to CoinGecko
   * as soon as it can serve again (answerMemo.ts keeps answers until then).
   */
  readonly holdsUntil: number
}

/** A coin to serve: the symbol asked and the CoinGecko coin it resolved to. */
export interface WantedCoin {
  readonly symbol: string
  readonly id: string
}

export interface SecondSourceShape {
  /** Whether asking makes sense at all; false: CoinGecko's failures reach the caller as before. */
  readonly enabled: boolean
  /** Attribution of its answers, as the answer's `attribution` writes it. */
  readonly attribution: string
  /**
   * Per coin id, its rate in `currency` (lower-case), or why not: kind `not-found` when the source does
   * not list the coin in that currency. Stops waiting at `deadline` (epoch ms). Never fails as a whole.
   */
  readonly ratesFor: (
    coins: ReadonlyArray<WantedCoin>,
    currency: string,
    deadline: number
  ) => Effect.Effect<ReadonlyMap<string, SecondOutcome>>
}

export type SecondOutcome =
  | { readonly _tag: "Served"; readonly rate: SecondRate }
  | { readonly _tag: "Failed"; readonly error: CoinbaseError }

export class SecondSource extends Context.Service<SecondSource, SecondSourceShape>()("app/rates/SecondSource") {
  /** No second source (`RATES_FALLBACK=none`, and tests about CoinGecko alone). */
  static readonly layerNone: Layer.Layer<SecondSource> = Layer.succeed(SecondSource)({
    enabled: false,
    attribution: "",
    ratesFor: () => Effect.succeed(new Map())
  })
}
