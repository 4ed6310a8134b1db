/**
 * Set-up of the second-source tests (issue 22): the HTTP app over a socket with the live CoinGecko Layer
 * and the Coinbase second source, both over real HTTP against their emulators, on a clock that starts
 * where the emulators are frozen (both then agree on which days are closed); the kept history in
 * memory, readable by the test; optionally the month's credits already spent.
 */
import { Effect, Layer } from "effect"
import type { CoinbaseConfigShape } from "../../../src/rates/coinbase/CoinbaseConfig.ts"
import * as Rates from "../../../src/rates/layer.ts"
import { LEDGER } from "../../../src/rates/coingecko/credits/MonthlyBudget.ts"
import { monthOf } from "../../../src/rates/coingecko/credits/monthlyCredits.ts"
import { DailyHistory, type DailyHistoryShape } from "../../../src/rates/history/DailyHistory.ts"
import type { SourceName } from "../../../src/rates/upstream.ts"
import { DurableCell } from "../../../src/platform/durableCell/DurableCell.ts"
import { makeMemoryCell } from "../../../src/platform/durableCell/memory.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { movableClock } from "../../support/clock.ts"
import type { Env } from "../../support/config.ts"
import { measureStalls } from "../../support/ownTime.ts"

/** Where both emulators are frozen: 2026-11-22T10:30:00Z. */
export const NOW = Date.UTC(2026, 10, 22, 10, 30)

/** Short CoinGecko guards, so that its faults cost little of the request's budget. */
export const coinGeckoFastEnv = (baseUrl: string, overrides: Env = {}): Env => ({
  COINGECKO_BASE_URL: baseUrl,
  COINGECKO_TIMEOUT_MS: "300",
  COINGECKO_REQUEST_BUDGET_MS: "3000",
  COINGECKO_RETRIES: "1",
  COINGECKO_RETRY_BASE_MS: "20",
  COINGECKO_CALLS_PER_MIN: "1000",
  COINGECKO_BREAKER_FAILURES: "50",
  COINGECKO_AUX_RETRY_MS: "60000",
  ...overrides
})

/** Coinbase guards for fault cases: 300 ms an attempt, one retry. */
export const coinbaseFastGuards: Partial<CoinbaseConfigShape> = {
  attemptTimeoutMs: 300,
  requestBudgetMs: 1_500,
  retries: 1,
  retryBaseDelayMs: 20,
  breakerFailures: 50
}

export interface FallbackApp extends TestApp {
  readonly history: DailyHistoryShape
  /** Moves the service's clock on (the emulators stay where they are). */
  readonly advance: (ms: number) => void
  /** The held points of a series, `[00:00 UTC, price]`. */
  readonly held: (coin: string, currency: string, source: SourceName) => Promise<ReadonlyArray<readonly [number, number]>>
}

export const startFallbackApp = async (options: {
  readonly coinGeckoEnv: Env
  readonly coinbaseUrl: string
  readonly coinbaseGuards?: Partial<CoinbaseConfigShape>
  /** The month's credits spent before start-up (with COINGECKO_CALLS_PER_MONTH in `coinGeckoEnv`). */
  readonly creditsSpent?: number
}): Promise<FallbackApp> => {
  const history = DailyHistory.makeMemory()
  const cell = makeMemoryCell()
  if (options.creditsSpent !== undefined) {
    const state = { lists: 0, cold: 0, refresh: 0, at: NOW, month: monthOf(NOW), spent: options.creditsSpent }
    Effect.runSync(cell.compareAndSet(LEDGER, undefined, JSON.stringify(state)))
  }
  const rates = Rates.layerTest({
    env: { RATES_FALLBACK: "coinbase", ...options.coinGeckoEnv, COINBASE_BASE_URL: options.coinbaseUrl },
    coinbase: options.coinbaseGuards,
    history: Layer.succeed(DailyHistory)(history),
    cell: Layer.succeed(DurableCell)(cell)
  })
  // One clock for the requests and for the background work the Layers start (the lists' loads, refreshes).
  const clock = movableClock(NOW)
  const app = await startTestApp({ rates: Layer.merge(rates.pipe(Layer.provide(clock.layer)), clock.layer) })
  return {
    ...app,
    advance: clock.advance,
    history,
    held: (coin, currency, source) =>
      Effect.runPromise(Effect.map(history.read({ coin, currency, source }), (found) => (found._tag === "Some" ? found.value.points : [])))
  }
}

export interface Asked {
  readonly status: number
  readonly ms: number
  /** `ms` less the time this process could not run (test/support/ownTime.ts): the service runs in it, so that is its own time. */
  readonly ownMs: number
  readonly retryAfter: string | null
  readonly contentType: string | null
  readonly body: Record<string, any>
}

export const ask = async (app: TestApp, body: unknown): Promise<Asked> => {
  const stalled = measureStalls()
  const started = performance.now()
  const res = await fetch(`${app.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const json = (await res.json()) as Record<string, any>
  const ms = Math.round(performance.now() - started)
  const stalledMs = stalled()
  return {
    status: res.status,
    ms,
    ownMs: Math.round(ms - stalledMs),
    retryAfter: res.headers.get("retry-after"),
    contentType: res.headers.get("content-type"),
    body: json
  }
}

/** One line for the closing note: status, sources, Retry-After, time. */
export const summary = (answered: Asked): string =>
  answered.status === 200
    ? `200 source=${answered.body.source} rates=${answered.body.rates.map((r: any) => `${r.symbol}:${r.source}`).join(",")} stale=${answered.body.stale} in ${answered.ms} ms`
    : `${answered.status} ${answered.body.code} Retry-After=${answered.retryAfter} in ${answered.ms} ms`
