/** What a `historical` call can fail with, each mapped to one problem by the handler (CONTRACT C4). */
import { Data } from "effect"

/** The upstream answered wrongly: 5xx, timeout, reset, unparsable or wrong-shaped body, our key rejected → 502. */
export class RatesUpstreamError extends Data.TaggedError("RatesUpstreamError")<{
  readonly reason: string
}> {}

/** The upstream cannot be asked now: rate-limited, circuit open, budget exhausted → 503 with Retry-After. */
export class RatesUnavailableError extends Data.TaggedError("RatesUnavailableError")<{
  readonly reason: string
  readonly retryAfterSeconds: number
}> {}

/** The requested `currency` is not one the upstream quotes → 400 validation_failed on /currency. */
export class UnsupportedCurrencyError extends Data.TaggedError("UnsupportedCurrencyError")<{
  readonly currency: string
}> {}

export type RatesError = RatesUpstreamError | RatesUnavailableError | UnsupportedCurrencyError
