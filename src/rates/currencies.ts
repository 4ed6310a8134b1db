/**
 * Step 1 of a `historical` call: is the currency one CoinGecko quotes? Judged by the list it publishes
 * (`/simple/supported_vs_currencies`), loaded in the background at start and then daily (auxiliary.ts),
 * never fetched for a request. A code not on the list is refused without asking the upstream.
 *
 * Until a list was ever loaded (the endpoint failing since start-up), the list as of this release
 * stands in: the upstream's outage must neither refuse real currencies nor let junk through to the
 * data calls.
 */
import { Duration, Effect, Schema, type Scope } from "effect"
import { makeAuxiliary } from "./auxiliary.ts"
import type { CoinGeckoClientShape } from "./CoinGeckoClient.ts"
import { UnsupportedCurrencyError } from "./errors.ts"
import type { RatesCache } from "./RatesCache.ts"
import type { RatesConfig } from "./RatesConfig.ts"
import { entryOf } from "./staleCache.ts"

/** CoinGecko's list in 2026, lower-case. */
export const RELEASE_CURRENCIES: ReadonlyArray<string> = [
  "btc", "eth", "ltc", "bch", "bnb", "eos", "xrp", "xlm", "link", "dot", "yfi", "sol", "usd", "aed", "ars", "aud", "bdt", "bhd",
  "bmd", "brl", "cad", "chf", "clp", "cny", "czk", "dkk", "eur", "gbp", "gel", "hkd", "huf", "idr", "ils", "inr", "jpy", "krw",
  "kwd", "lkr", "mmk", "mxn", "myr", "ngn", "nok", "nzd", "php", "pkr", "pln", "rub", "sar", "sek", "sgd", "thb", "try", "twd",
  "uah", "vef", "vnd", "zar", "xdr", "xag", "xau", "bits", "sats"
]

/** Fails with UnsupportedCurrencyError for a code the upstream does not list; waits at most until `deadline`. */
export type CheckCurrency = (currency: string, deadline: number) => Effect.Effect<void, UnsupportedCurrencyError>

export const makeCheckCurrency = (
  upstream: CoinGeckoClientShape
): Effect.Effect<CheckCurrency, never, RatesCache | RatesConfig | Scope.Scope> =>
  Effect.gen(function*() {
    const list = yield* makeAuxiliary({
      name: "currency list",
      key: "rates:v2:currencies",
      entry: entryOf(Schema.Array(Schema.String)),
      fetch: Effect.map(upstream.supportedCurrencies, (codes) => codes.map((code) => code.toLowerCase())),
      refreshEvery: Duration.hours(24)
    })
    // One Set per list held, built on its first use.
    const sets = new WeakMap<ReadonlyArray<string>, ReadonlySet<string>>()
    const setOf = (codes: ReadonlyArray<string>) => {
      let set = sets.get(codes)
      if (set === undefined) sets.set(codes, set = new Set(codes))
      return set
    }
    return (currency, deadline) =>
      Effect.flatMap(list.get(deadline), (codes) =>
        setOf(codes ?? RELEASE_CURRENCIES).has(currency) ? Effect.void : Effect.fail(new UnsupportedCurrencyError({ currency })))
  })
