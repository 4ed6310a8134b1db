/**
 * The second source as configured (CONTRACT C2 `RATES_FALLBACK`): Coinbase Exchange by default, none
 * with `none`. Needs the Coinbase client (coinbase/CoinbaseClient.ts), its config and the kept history.
 */
import { Effect, Layer } from "effect"
import { CoinbaseClient } from "../coinbase/CoinbaseClient.ts"
import { CoinbaseConfig } from "../coinbase/CoinbaseConfig.ts"
import { DailyHistory } from "../history/DailyHistory.ts"
import { SERIES_DAYS } from "../marketData.ts"
import { makeCoinbaseRates } from "./coinbaseRates.ts"
import { SecondSource } from "./SecondSource.ts"

/** Coinbase, unless `RATES_FALLBACK=none`. */
export const layerNoDeps: Layer.Layer<SecondSource, never, CoinbaseClient | CoinbaseConfig | DailyHistory> = Layer.unwrap(
  Effect.map(CoinbaseConfig, (config) =>
    config.fallback === "none"
      ? SecondSource.layerNone
      : Layer.effect(SecondSource, Effect.map(Effect.all([CoinbaseClient, DailyHistory]), ([client, history]) => makeCoinbaseRates(client, history, SERIES_DAYS))))
)

/** The server's: the Coinbase client and its config read from the current ConfigProvider. Needs an `HttpClient` and a `DailyHistory`. */
export const layer = layerNoDeps.pipe(Layer.provide(CoinbaseClient.layer), Layer.provide(CoinbaseConfig.layer))

/** Several instances (REDIS_URL): Coinbase's bucket and breaker shared through Redis under `keyPrefix`. */
export const layerRedis = (keyPrefix: string) =>
  layerNoDeps.pipe(Layer.provide(CoinbaseClient.layerRedis(keyPrefix)), Layer.provide(CoinbaseConfig.layer))
