/**
 * What every rates source shares (CoinGecko, Coinbase Exchange): how a call to it fails, what each
 * failure means to the caller of the rates operation (502, or 503 with Retry-After) and to a circuit
 * breaker, and who pays for a call.
 *
 * One error type for every source (`SourceError`, naming its source), so that the ports and the use
 * case never import an adapter's error.
 */
import { Cause, Data, Effect, Exit, Option } from "effect"
import { CircuitBreaker } from "effect/persistence"
import { RatesUnavailableError, RatesUpstreamError, type SourceName } from "./RatesProvider.ts"

export type { SourceName } from "./RatesProvider.ts"

export type SourceFailureKind =
  /** 5xx, 408, timeout, connection reset: safe to retry a GET. */
  | "transient"
  /** A 2xx whose body is not JSON, is cut short, or has the wrong shape. */
  | "invalid-response"
  /** Our key refused (401/403) or another 4xx we do not expect. Retrying cannot help. */
  | "rejected"
  /** The source's own "no such coin/product" (404 with its JSON error), or a coin it does not list. An answer, not a fault. */
  | "not-found"
  /** The source's 429, our cool-down after one, or a budget of ours spent. */
  | "rate-limited"
  /** The circuit breaker refuses calls after repeated failures. */
  | "circuit-open"
  /** A list the calls depend on (coin index, product list) is not held and cannot be loaded now. */
  | "unavailable"

const displayName: Record<SourceName, string> = { coingecko: "CoinGecko", coinbase: "Coinbase" }

export class SourceError extends Data.TaggedError("SourceError")<{
  readonly source: SourceName
  readonly kind: SourceFailureKind
  readonly detail: string
  /** Whole seconds to wait before asking again; meaningful for rate-limited, circuit-open, unavailable. */
  readonly retryAfterSeconds: number
}> {
  override get message() {
    return `${displayName[this.source]} ${this.kind}: ${this.detail}`
  }
}

/** `fail("transient", "…")` for one source. */
export const failWithFor = (source: SourceName) => (kind: SourceFailureKind, detail: string, retryAfterSeconds = 0) =>
  Effect.fail(new SourceError({ source, kind, detail, retryAfterSeconds }))

/** The caller had better wait and ask again (503), rather than the source being broken (502). */
export const isUnavailable = (error: SourceError): boolean =>
  error.kind === "rate-limited" || error.kind === "circuit-open" || error.kind === "unavailable"

/** The public error for a failure (not-found is handled by callers before this). */
export const toRatesError = (error: SourceError): RatesUpstreamError | RatesUnavailableError =>
  isUnavailable(error)
    ? new RatesUnavailableError({ reason: error.message, retryAfterSeconds: Math.max(1, error.retryAfterSeconds) })
    : new RatesUpstreamError({ reason: error.message })

/** A logical call's verdict for the circuit breaker: only a source that does not answer properly counts. */
export const breakerOutcome = (exit: Exit.Exit<unknown, SourceError>): CircuitBreaker.Outcome => {
  if (Exit.isSuccess(exit)) return CircuitBreaker.success
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isNone(error)) return CircuitBreaker.failure()
  switch (error.value.kind) {
    case "transient":
    case "invalid-response":
      return CircuitBreaker.failure()
    case "not-found":
      return CircuitBreaker.success // the source answered correctly
    default:
      // Rate limits have their own cool-down; a refused key or request is a fault to report, not an outage to hide.
      return CircuitBreaker.ignored
  }
}

// ---------------------------------------------------------------------------------------------------
// Who pays

/**
 * Who pays for a call (CONTRACT C4 "Under abuse and faults"): a request, charged to its caller's share
 * of the budget, or the service itself in the background (refreshes, the lists). Decided by whoever
 * starts the work (the use case for a request, the copies for a refresh) and passed to the client,
 * which asks the budgets. A request's charge is mutable on purpose: one request, one failure in the breaker.
 */
export type Charge =
  | {
    readonly _tag: "Request"
    /** `RatesQuery.caller`; undefined: a cold fetch charged to no one's share (internal callers, tests). */
    readonly caller: string | undefined
    /** Set when one of this request's calls has counted a failure in the breaker. */
    failureCounted: boolean
  }
  | { readonly _tag: "Background" }

export const Charge = {
  request: (caller: string | undefined): Charge => ({ _tag: "Request", caller, failureCounted: false }),
  background: { _tag: "Background" } as Charge
}

/**
 * The breaker's verdict on a call, counted at most once per request: retries are already inside one
 * call, and a request whose calls all fail for the same reason is one failure, not one per coin.
 */
export const countOncePerRequest = (outcome: CircuitBreaker.Outcome, charge: Charge): CircuitBreaker.Outcome => {
  if (outcome._tag !== "Failure" || charge._tag === "Background") return outcome
  if (charge.failureCounted) return CircuitBreaker.ignored
  charge.failureCounted = true
  return outcome
}
