/** Shared set-up of the Coinbase client tests: the real Layer over Node's HTTP client, against the emulator. */
import { NodeHttpClient } from "@effect/platform-node"
import { Clock, Effect, Layer } from "effect"
import { CoinbaseClient } from "../../src/rates/coinbase/CoinbaseClient.ts"
import { CoinbaseConfig, type CoinbaseConfigShape } from "../../src/rates/coinbase/CoinbaseConfig.ts"
import { configFrom, type Env } from "../support/config.ts"

/** The client as production builds it, from `env` (COINBASE_BASE_URL …), with some guards replaced. */
export const coinbaseClient = (baseUrl: string, guards: Partial<CoinbaseConfigShape> = {}, env: Env = {}) =>
  CoinbaseClient.layer.pipe(
    Layer.provide(CoinbaseConfig.layerWith(guards).pipe(Layer.provide(configFrom({ COINBASE_BASE_URL: baseUrl, ...env })))),
    Layer.provide(NodeHttpClient.layerUndici)
  )

/** Fault-test guards: 300 ms per attempt, one retry, 2 s per call. */
export const fastGuards: Partial<CoinbaseConfigShape> = {
  attemptTimeoutMs: 300,
  requestBudgetMs: 2_000,
  retries: 1,
  retryBaseDelayMs: 20,
  breakerFailures: 50
}

/** Runs `self`, returning its result (success or failure) and how long it took. */
export const timed = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const result = yield* Effect.result(self)
    return { result, elapsedMs: (yield* Clock.currentTimeMillis) - start }
  })
