/**
 * How a call to a rates upstream (CoinGecko, Coinbase Exchange) can fail, shared by both clients: what
 * each kind means to the caller of the rates operation (502 or 503 with Retry-After) and to a circuit
 * breaker. Each upstream keeps its own tagged error (coinGeckoResponses.ts, coinbase/coinbaseResponses.ts)
 * with these kinds.
 */
import { Cause, Exit, Option } from "effect"
import { CircuitBreaker } from "effect/persistence"
import { RatesUnavailableError, RatesUpstreamError } from "./errors.ts"

export type UpstreamFailureKind =
  /** 5xx, 408, timeout, connection reset: safe to retry a GET. */
  | "transient"
  /** A 2xx whose body is not JSON, is cut short, or has the wrong shape. */
  | "invalid-response"
  /** Our key refused (401/403) or another 4xx we do not expect. Retrying cannot help. */
  | "rejected"
  /** The upstream's own "no such coin/product" (404 with its JSON error). An answer, not a fault. */
  | "not-found"
  /** The upstream's 429, our cool-down after one, or a budget of ours spent. */
  | "rate-limited"
  /** The circuit breaker refuses calls after repeated failures. */
  | "circuit-open"
  /** A list the calls depend on (coin index, product list) is not held and cannot be loaded now. */
  | "unavailable"

export interface UpstreamFailure {
  readonly kind: UpstreamFailureKind
  readonly message: string
  /** Whole seconds to wait before asking again; meaningful for rate-limited, circuit-open, unavailable. */
  readonly retryAfterSeconds: number
}

/** The public error for a failure (not-found is handled by callers before this). */
export const toRatesError = (error: UpstreamFailure): RatesUpstreamError | RatesUnavailableError =>
  error.kind === "rate-limited" || error.kind === "circuit-open" || error.kind === "unavailable"
    ? new RatesUnavailableError({ reason: error.message, retryAfterSeconds: Math.max(1, error.retryAfterSeconds) })
    : new RatesUpstreamError({ reason: error.message })

/** A logical call's verdict for the circuit breaker: only an upstream that does not answer properly counts. */
export const breakerOutcome = (exit: Exit.Exit<unknown, UpstreamFailure>): CircuitBreaker.Outcome => {
  if (Exit.isSuccess(exit)) return CircuitBreaker.success
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isNone(error)) return CircuitBreaker.failure()
  switch (error.value.kind) {
    case "transient":
    case "invalid-response":
      return CircuitBreaker.failure()
    case "not-found":
      return CircuitBreaker.success // the upstream answered correctly
    default:
      // Rate limits have their own cool-down; a refused key or request is a fault to report, not an outage to hide.
      return CircuitBreaker.ignored
  }
}
