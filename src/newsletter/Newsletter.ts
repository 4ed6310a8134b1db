/**
 * The newsletter capability as the HTTP layer sees it. Live Layers (Brevo, Listmonk, local list)
 * implement it; handlers answer 200 for every outcome so that nobody can enumerate subscribers.
 */
import { Context, Data, Effect, Layer } from "effect"
import { HttpClient } from "effect/http"
import { Locale as LocaleSchema } from "../api/schemas.ts"
import type { ConfigInvalid } from "../config/ConfigInvalid.ts"
import { makeBrevo } from "./brevo.ts"
import { makeListmonk } from "./listmonk.ts"
import { makeLocal } from "./local.ts"
import { NewsletterConfig } from "./NewsletterConfig.ts"

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
}>()("app/Newsletter") {
  /**
   * The live provider chosen by NEWSLETTER_PROVIDER (CONTRACT C2, C5), configuration from the current
   * ConfigProvider. Needs an `HttpClient` (the "local" list ignores it and keeps its file open for
   * the layer's lifetime). The in-memory fake for tests is `NewsletterMemory.layer`.
   */
  static readonly layer: Layer.Layer<Newsletter, ConfigInvalid, HttpClient.HttpClient> = Layer.effect(
    Newsletter,
    Effect.gen(function*() {
      const config = yield* NewsletterConfig
      const client = yield* HttpClient.HttpClient
      yield* Effect.logInfo(`newsletter provider: ${config.provider}`)
      switch (config.provider) {
        case "brevo":
          return makeBrevo(config.brevo, config.call, client)
        case "listmonk":
          return makeListmonk(config.listmonk, config.call, client)
        case "local":
          return yield* makeLocal(config)
      }
    })
  ).pipe(Layer.provide(NewsletterConfig.layer))
}
