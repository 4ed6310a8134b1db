/**
 * The newsletter capability as the HTTP layer sees it: the tag and its errors. Each provider
 * implements it in its own file with its Layer (brevo.ts, listmonk.ts, local.ts), layer.ts chooses
 * one by NEWSLETTER_PROVIDER, memory.ts is the tests' fake; handlers answer 200 for every outcome so
 * that nobody can enumerate subscribers.
 */
import { Context, Data, type Effect } from "effect"
import { Locale as LocaleSchema } from "../api/schemas.ts"

/** The contract's locales (spec §2). */
export const Locales = LocaleSchema.literals
export type Locale = typeof LocaleSchema.Type

export interface SubscribeInput {
  /** Already validated and normalised: trimmed, domain lower-cased and punycode (CONTRACT C5). */
  readonly email: string
  readonly locale: Locale
}

/** What the provider did; all three answer 200 `{"success": true}`. */
export type SubscribeOutcome = "created" | "pending" | "existing"

/** The provider itself calls the address invalid → 400 invalid_email. */
export class NewsletterInvalidEmail extends Data.TaggedError("NewsletterInvalidEmail")<{
  readonly reason: string
}> {}

/** Any provider failure: 5xx, 4xx that is our fault, 429, timeout, reset, bad body → 502 upstream_error. */
export class NewsletterUpstreamError extends Data.TaggedError("NewsletterUpstreamError")<{
  readonly reason: string
}> {}

export class Newsletter extends Context.Service<Newsletter, {
  readonly provider: string
  readonly subscribe: (
    input: SubscribeInput
  ) => Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError>
}>()("app/Newsletter") {}
