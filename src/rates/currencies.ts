/**
 * Step 1 of a `historical` call: is the currency one CoinGecko quotes? Judged by
 * `/simple/supported_vs_currencies`, cached a day (with a last good copy).
 */
import { Duration, Effect, Schema } from "effect"
import type { CoinGeckoClientShape } from "./CoinGeckoClient.ts"
import { UnsupportedCurrencyError } from "./errors.ts"
import { entryOf, type StaleCache } from "./staleCache.ts"

const CURRENCIES_KEY = "rates:cg:currencies"
const CURRENCIES_TTL = Duration.hours(24)
const currenciesEntry = entryOf(Schema.Array(Schema.String))

/**
 * Resolves to when the list it judged by expires (epoch ms); undefined when it could not judge (the
 * list is unavailable: a bad code then fails in the data calls, and an outage of this one endpoint must
 * not hide cached data) or judged by an old copy.
 */
export type CheckCurrency = (currency: string, deadline: number) => Effect.Effect<number | undefined, UnsupportedCurrencyError>

export const makeCheckCurrency = (cache: StaleCache, upstream: CoinGeckoClientShape): CheckCurrency => (currency, deadline) =>
  cache.cachedOrFetch({
    key: CURRENCIES_KEY,
    entry: currenciesEntry,
    fetch: Effect.suspend(() => Effect.map(upstream.supportedCurrencies, (codes) => codes.map((code) => code.toLowerCase()))),
    ttl: () => CURRENCIES_TTL,
    deadline
  }).pipe(
    Effect.flatMap(({ value, storedAt, stale }) =>
      value.includes(currency)
        ? Effect.succeed(stale ? undefined : storedAt + Duration.toMillis(CURRENCIES_TTL))
        : Effect.fail(new UnsupportedCurrencyError({ currency }))),
    Effect.catchTag("CoinGeckoError", (error) =>
      Effect.as(Effect.logWarning("rates: currency list unavailable; not validating", error.message), undefined))
  )
