/**
 * In-memory `Newsletter` for HTTP unit tests: no network, no files, deterministic. It records every
 * input and lets a test provoke each outcome through the address alone:
 *   - local part "invalid" (invalid@example.com) → NewsletterInvalidEmail (→ 400 invalid_email)
 *   - local part "down" (down@example.com)       → NewsletterUpstreamError (→ 502 upstream_error)
 *   - an address seen before                     → "existing"; otherwise "pending"
 */
import { Context, Effect, Layer } from "effect"
import {
  Newsletter,
  NewsletterInvalidEmail,
  NewsletterUpstreamError,
  type SubscribeInput,
  type SubscribeOutcome
} from "./Newsletter.ts"

export class NewsletterMemory extends Context.Service<NewsletterMemory, {
  /** Every input the fake received, in order, including those it failed. */
  readonly inputs: Effect.Effect<ReadonlyArray<SubscribeInput>>
  /** Forgets inputs and known addresses. */
  readonly clear: Effect.Effect<void>
}>()("app/NewsletterMemory") {
  static readonly layer: Layer.Layer<Newsletter | NewsletterMemory> = Layer.effectContext(
    Effect.sync(() => {
      const inputs: Array<SubscribeInput> = []
      const known = new Set<string>()
      const subscribe = (
        input: SubscribeInput
      ): Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError> =>
        Effect.suspend((): Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError> => {
          inputs.push(input)
          const local = input.email.slice(0, input.email.lastIndexOf("@")).toLowerCase()
          if (local === "invalid") {
            return Effect.fail(new NewsletterInvalidEmail({ reason: "the provider rejected the address" }))
          }
          if (local === "down") {
            return Effect.fail(new NewsletterUpstreamError({ reason: "memory provider: simulated outage" }))
          }
          if (known.has(input.email)) return Effect.succeed("existing")
          known.add(input.email)
          return Effect.succeed("pending")
        })
      const memory = NewsletterMemory.of({
        inputs: Effect.sync(() => [...inputs]),
        clear: Effect.sync(() => {
          inputs.length = 0
          known.clear()
        })
      })
      return Context.make(Newsletter, Newsletter.of({ provider: "memory", subscribe })).pipe(
        Context.add(NewsletterMemory, memory)
      )
    })
  )
}
