/** Shared set-up of the Coinbase tests: the real Layers over Node's HTTP client, against the emulator. */
import { Effect, Layer } from "effect"
import { CoinbaseClient } from "../../src/rates/coinbase/CoinbaseClient.ts"
import { CoinbaseConfig, type CoinbaseConfigShape } from "../../src/rates/coinbase/CoinbaseConfig.ts"
import { CoinbaseProducts, makeProducts } from "../../src/rates/coinbase/products.ts"
import * as CoinbaseSecondSource from "../../src/rates/coinbase/secondSource.ts"
import { CopyStore } from "../../src/rates/copies/CopyStore.ts"
import { DailyHistory, type DailyHistoryShape } from "../../src/rates/history/DailyHistory.ts"
import { configFrom, type Env } from "./config.ts"
import { upstreamHttp } from "./upstream.ts"

/**
 * The client as production builds it, from `env` (COINBASE_BASE_URL …), with some guards replaced; its
 * config and a memory store of copies beside it, for what the adapter holds (`products`).
 */
export const coinbaseClient = (baseUrl: string, guards: Partial<CoinbaseConfigShape> = {}, env: Env = {}) =>
  CoinbaseClient.layer.pipe(
    Layer.provideMerge(CoinbaseConfig.layerWith(guards).pipe(Layer.provide(configFrom({ COINBASE_BASE_URL: baseUrl, ...env })))),
    Layer.provideMerge(CopyStore.layerMemory()),
    Layer.provideMerge(upstreamHttp)
  )

/** The product list as the second source holds it (products.ts), over the client in context. */
export const products = Effect.gen(function*() {
  return yield* makeProducts(yield* CoinbaseClient, yield* CoinbaseConfig)
})

/**
 * The second source as production builds it (Coinbase, history in memory: `history`, for a test that
 * reads what was kept), with some guards replaced.
 */
export const coinbaseSecondSource = (baseUrl: string, guards: Partial<CoinbaseConfigShape> = {}, history: DailyHistoryShape = DailyHistory.makeMemory()) =>
  CoinbaseSecondSource.layer.pipe(
    Layer.provide(CoinbaseProducts.layer),
    Layer.provide(Layer.merge(coinbaseClient(baseUrl, guards, { RATES_FALLBACK: "coinbase" }), Layer.succeed(DailyHistory)(history)))
  )

/** Fault-test guards: 300 ms per attempt, one retry, 2 s per call. */
export const fastGuards: Partial<CoinbaseConfigShape> = {
  attemptTimeoutMs: 300,
  requestBudgetMs: 2_000,
  retries: 1,
  retryBaseDelayMs: 20,
  breakerFailures: 50
}

