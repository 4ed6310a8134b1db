/**
 * POST /api/subscribe (spec §4, CONTRACT C5). Every provider outcome (new, pending, already
 * subscribed) answers the same 200, so the endpoint cannot be used to enumerate subscribers.
 */
import { Effect, Result } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { InvalidEmail, UpstreamError, ValidationFailed } from "../api/problems.ts"
import { validateEmail } from "./email.ts"
import { Newsletter } from "./Newsletter.ts"

export const NewsletterHandlers = HttpApiBuilder.group(
  Api,
  "newsletter",
  Effect.fn(function*(handlers) {
    const newsletter = yield* Newsletter
    return handlers.handle("subscribeToUpdates", ({ payload }) =>
      Effect.gen(function*() {
        const email = validateEmail(payload.email)
        if (Result.isFailure(email)) {
          return yield* new ValidationFailed({
            detail: `/email: the address ${email.failure}.`,
            errors: [{ pointer: "/email", detail: `the address ${email.failure}` }]
          })
        }
        yield* newsletter.subscribe({ email: email.success, locale: payload.locale }).pipe(
          Effect.catchTags({
            NewsletterInvalidEmail: () => Effect.fail(new InvalidEmail({})),
            NewsletterUpstreamError: () =>
              Effect.fail(new UpstreamError({ detail: "The newsletter provider failed to accept the subscription." }))
          })
        )
        return { success: true as const }
      }))
  })
)
