/**
 * Shared set-up for the rates tests: the live rates capability (src/rates/layer.ts) over real HTTP
 * against the emulator, with short timeouts so every fault case finishes in about a second. CoinGecko
 * alone unless the environment names a second source (`RATES_FALLBACK`) or a live feed (`COINBASE_WS_URL`).
 */
import { Effect, Layer, Option, type Schema } from "effect"
import { clockLayerFrom } from "./clock.ts"
import { configFrom, type Env } from "./config.ts"
import { layerMemory as durableCellMemory } from "../../src/platform/durableCell/memory.ts"
import { RatesAnswerMemo } from "../../src/rates/answer.ts"
import { RatesDemand, type RatesDemandShape } from "../../src/rates/coingecko/latestPrices.ts"
import { CoinGeckoConfig } from "../../src/rates/coingecko/CoinGeckoConfig.ts"
import { CopyStore, type CopyStoreShape } from "../../src/rates/copies/CopyStore.ts"
import { DailyHistory } from "../../src/rates/history/DailyHistory.ts"
import * as Rates from "../../src/rates/layer.ts"
import { CoinbaseConfig } from "../../src/rates/coinbase/CoinbaseConfig.ts"
import { RatesProvider, type RatesQuery } from "../../src/rates/RatesProvider.ts"
import { upstreamHttp } from "./upstream.ts"

/** The emulator's frozen clock in most tests: 2026-11-22T10:00:00Z. */
export const EMULATOR_NOW = Date.UTC(2026, 10, 22, 10, 0, 0)

/** Fault-test settings: 300 ms per attempt, one retry, 2 s per request. */
export const fastEnv = (baseUrl: string, overrides: Env = {}): Env => ({
  COINGECKO_BASE_URL: baseUrl,
  COINGECKO_TIMEOUT_MS: "300",
  COINGECKO_REQUEST_BUDGET_MS: "2000",
  COINGECKO_RETRIES: "1",
  COINGECKO_RETRY_BASE_MS: "20",
  COINGECKO_CALLS_PER_MIN: "1000",
  COINGECKO_MAX_CONCURRENCY: "4",
  COINGECKO_BREAKER_FAILURES: "50",
  COINGECKO_DEFAULT_RETRY_AFTER_S: "13",
  ...overrides
})

/**
 * Healthy-upstream settings: timeouts generous enough that a loaded test machine never causes a retry,
 * so upstream call counts are exact.
 */
export const healthyEnv = (baseUrl: string, overrides: Env = {}): Env =>
  fastEnv(baseUrl, { COINGECKO_TIMEOUT_MS: "3000", COINGECKO_REQUEST_BUDGET_MS: "8000", ...overrides })

/**
 * The production Layer wiring, configured from `env`, over Node's real HTTP client, with a history in
 * memory. With `now`, on a clock that starts there (an emulator frozen at `now` then agrees with the
 * service on which days are closed); else on the real clock.
 */
export const liveRates = (env: Env, now?: number) => {
  const rates = Rates.layer.pipe(
    Layer.provide(configFrom({ RATES_FALLBACK: "none", COINBASE_WS_URL: "none", ...env })),
    Layer.provide(Layer.mergeAll(upstreamHttp, DailyHistory.layerMemory, durableCellMemory))
  )
  return now === undefined ? rates : rates.pipe(Layer.provideMerge(clockLayerFrom(now)))
}

/**
 * The live capability with CoinGecko alone (no second source), configured from the ConfigProvider, its
 * copies and guards shared through Redis under `keyPrefix` (one instance in memory: `Rates.layerTest`).
 */
export const coinGeckoAloneRedis = (keyPrefix: string) =>
  Rates.layerRedisConfigured(keyPrefix).pipe(Layer.provide(Layer.mergeAll(CoinGeckoConfig.layer, CoinbaseConfig.layerWith({ fallback: "none", feedUrl: undefined }))))

/**
 * A cache whose entries the test can age at will: every copy past its grace, kept as a last good copy
 * (negative answers dropped), the state of a long-running instance whose TTLs have passed.
 */
export const makeAgeableCache = () => {
  const entries = new Map<string, string>()
  const shape: CopyStoreShape = {
    get: (key) => Effect.sync(() => Option.map(Option.fromUndefinedOr(entries.get(key)), (json) => JSON.parse(json) as Schema.Json)),
    set: (key, value) => Effect.sync(() => void entries.set(key, JSON.stringify(value))),
    shared: false
  }
  return {
    layer: Layer.succeed(CopyStore)(shape),
    /** Every entry expired and past its grace: only last good copies remain. */
    expireFreshEntries: () => {
      for (const [key, json] of entries) {
        const entry = JSON.parse(json) as { storedAt: number; value: unknown }
        if (entry.value === null) entries.delete(key)
        else entries.set(key, JSON.stringify({ ...entry, refreshAt: entry.storedAt, freshUntil: entry.storedAt, graceUntil: entry.storedAt }))
      }
    },
    keys: () => [...entries.keys()]
  }
}

/** The provider's whole answer: the result and until when it holds. */
export const answer = (query: Partial<RatesQuery> & Pick<RatesQuery, "symbols">) =>
  Effect.gen(function*() {
    const rates = yield* RatesProvider
    return yield* rates.historical({ currency: "usd", days: 30, ...query })
  })

/** The provider's result (the C4 body). */
export const historical = (query: Partial<RatesQuery> & Pick<RatesQuery, "symbols">) =>
  Effect.map(answer(query), ({ result }) => result)

/**
 * RatesProvider.layerTest saying its answers hold until `freshUntil()` and remembering them as the use
 * case's last step does (the memo the edge reads: one per server build), counting how often it is asked
 * (that is, how often a request reached the HttpApi handler rather than a ready answer), and noting its
 * caller in the demand as the use case does.
 */
export const countingRatesProvider = (freshUntil: () => number, options: { readonly delayMs?: number } = {}) => {
  const calls = { historical: 0 }
  // The demand the use case notes a request's caller in (and the edge a repeat's): the server build's one.
  const held: { demand?: RatesDemandShape } = {}
  const layer = Layer.effect(
    RatesProvider,
    Effect.map(Effect.all([RatesProvider, RatesAnswerMemo, RatesDemand]), ([inner, memo, demand]) => {
      held.demand = demand
      return RatesProvider.of({
        latestPrices: inner.latestPrices,
        historical: (query) =>
          Effect.suspend(() => {
            calls.historical++
            demand.note(query.caller, query.currency)
            const answered = Effect.map(inner.historical(query), (answer) => memo.remember(query, { ...answer, freshUntil: freshUntil() }))
            return options.delayMs === undefined ? answered : Effect.delay(answered, options.delayMs)
          })
      })
    })
  ).pipe(Layer.provide(Layer.mergeAll(RatesProvider.layerTest, RatesAnswerMemo.layer, RatesDemand.layer)))
  return { layer, calls, demand: () => held.demand! }
}
