/** What every rates source shares: how a call fails (`SourceError`), what that means to the caller (502 or 503), and who pays (`Charge`). */
import { Data, Effect } from "effect"
import { RatesUnavailableError, RatesUpstreamError, type SourceName } from "./RatesProvider.ts"

export type { SourceName } from "./RatesProvider.ts"

export type SourceFailureKind =
  /** 5xx, 408, timeout, connection reset: safe to retry a GET. */
  | "transient"
  /** A 2xx whose body is not JSON, is cut short, or has the wrong shape. */
  | "invalid-response"
  /** Our key refused (401/403) or another 4xx we do not expect: a fault operators are alerted to. Retrying cannot help. */
  | "rejected"
  /** Our request refused as one the source cannot take (a 414: its URL too long): a fault of ours to fix, not of the key. */
  | "bad-request"
  /** What we asked lies outside what the plan serves (CoinGecko Demo: history beyond 365 days, error 10012). */
  | "beyond-plan"
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

/** Who pays for a call (C4 "Under abuse and faults"): a request (its caller's share) or the background; mutable: one request, one breaker failure. */
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
