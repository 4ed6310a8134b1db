/** What every rates source shares: how a call fails (`SourceError`), what that means to the caller (502 or 503), who pays and until when (`Spend`). */
import { Context, Effect, Schema } from "effect"
import { RatesUnavailableError, RatesUpstreamError, type SourceName } from "./RatesProvider.ts"

export type { SourceName } from "./RatesProvider.ts"

// Why a call failed: each reason a Schema tagged error, so that callers catch one (`Effect.catchReason`) rather than compare strings.
/** 5xx, 408, timeout, connection reset: safe to retry a GET. */
class Transient extends Schema.TaggedError<Transient>()("Transient", {}) {}
/** A 2xx whose body is not JSON, is cut short, or has the wrong shape. */
class InvalidResponse extends Schema.TaggedError<InvalidResponse>()("InvalidResponse", {}) {}
/** Our key refused (401/403) or another 4xx we do not expect: a fault operators are alerted to. Retrying cannot help. */
class Rejected extends Schema.TaggedError<Rejected>()("Rejected", {}) {}
/** Our request refused as one the source cannot take (a 414: its URL too long): a fault of ours to fix, not of the key. */
class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", {}) {}
/** What we asked lies outside what the plan serves (CoinGecko Demo: history beyond 365 days, error 10012). */
class BeyondPlan extends Schema.TaggedError<BeyondPlan>()("BeyondPlan", {}) {}
/** The source's own "no such coin/product" (404 with its JSON error), or a coin it does not list. An answer, not a fault. */
class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {}) {}
/** The source's 429, our cool-down after one, or a budget of ours spent. */
class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {}) {}
/** The circuit breaker refuses calls after repeated failures. */
class CircuitOpen extends Schema.TaggedError<CircuitOpen>()("CircuitOpen", {}) {}
/** A list the calls depend on (coin index, product list) is not held and cannot be loaded now. */
class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {}) {}

const reasons = { Transient, InvalidResponse, Rejected, BadRequest, BeyondPlan, NotFound, RateLimited, CircuitOpen, Unavailable }
type SourceFailure = InstanceType<typeof reasons[keyof typeof reasons]>
export type SourceFailureTag = SourceFailure["_tag"]
const displayName: Record<SourceName, string> = { coingecko: "CoinGecko", coinbase: "Coinbase" }
export class SourceError extends Schema.TaggedError<SourceError>()("SourceError", {
  source: Schema.Literals(["coingecko", "coinbase"]),
  reason: Schema.Union(Object.values(reasons)),
  detail: Schema.String,
  /** Whole seconds to wait before asking again; meaningful for RateLimited, CircuitOpen, Unavailable. */
  retryAfterSeconds: Schema.Finite
}) {
  /** The reason in words, as messages and logs say it (RateLimited: "rate-limited"); code catches the reason itself. */
  get kind(): string {
    return this.reason._tag.replace(/(?<!^)[A-Z]/g, (letter) => `-${letter}`).toLowerCase()
  }
  override get message() {
    return `${displayName[this.source]} ${this.kind}: ${this.detail}`
  }
}

/** A failure of `source` for `reason`. */
export const sourceError = (source: SourceName, reason: SourceFailureTag, detail: string, retryAfterSeconds = 0): SourceError =>
  new SourceError({ source, reason: new reasons[reason](), detail, retryAfterSeconds })

/** `fail("Transient", "…")` for one source. */
export const failWithFor = (source: SourceName) => (reason: SourceFailureTag, detail: string, retryAfterSeconds = 0) =>
  Effect.fail(sourceError(source, reason, detail, retryAfterSeconds))

/** The caller had better wait and ask again (503), rather than the source being broken (502). */
export const isUnavailable = (error: SourceError): boolean =>
  error.reason._tag === "RateLimited" || error.reason._tag === "CircuitOpen" || error.reason._tag === "Unavailable"

/** The public error for a failure (not-found is handled by callers before this). */
export const toRatesError = (error: SourceError): RatesUpstreamError | RatesUnavailableError =>
  isUnavailable(error)
    ? new RatesUnavailableError({ reason: error.message, retryAfterSeconds: Math.max(1, error.retryAfterSeconds) })
    : new RatesUpstreamError({ reason: error.message })

/** Who pays for a call (C4 "Under abuse and faults"): a request (its caller's share), one object each, or the background. */
export type Charge =
  | {
    readonly _tag: "Request"
    /** `RatesQuery.caller`; undefined: a cold fetch charged to no one's share (internal callers, tests). */
    readonly caller: string | undefined
  }
  | { readonly _tag: "Background" }

export const Charge = {
  request: (caller: string | undefined): Charge => ({ _tag: "Request", caller }),
  background: { _tag: "Background" } as Charge
}

/**
 * Who pays for what the work running fetches, and until when (epoch ms) it waits for it: one context, set by the
 * use case for each of its steps (historicalRates.ts), read where a call is paid (the clients) or waited for (the
 * copies). The service's own work (refreshes, lists) runs with the default: the background's, without a deadline.
 */
export interface Spend {
  readonly charge: Charge
  readonly deadline: number
}
export const Spend = Context.Reference<Spend>("app/rates/Spend", { defaultValue: () => ({ charge: Charge.background, deadline: Number.POSITIVE_INFINITY }) })
/** Runs an effect as work waited for until `deadline`, paid by `charge` (when not said: a request's, of no one's share). */
export const spendingUntil = (deadline: number, charge: Charge = Charge.request(undefined)) => Effect.provideService(Spend, { charge, deadline })
