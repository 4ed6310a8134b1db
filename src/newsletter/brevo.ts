/**
 * Brevo double opt-in (upstreams.md §3.2, §3.6): `POST {base}/contacts/doubleOptinConfirmation`.
 * 201 "DOI contact created" and 204 "DOI contact updated" both answer 200 upstream of us (no
 * enumeration); only Brevo's own verdict that the address is invalid becomes invalid_email.
 */
import { Effect, Layer, Redacted, Schema } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import {
  Newsletter,
  NewsletterInvalidEmail,
  NewsletterUpstreamError,
  type SubscribeInput,
  type SubscribeOutcome
} from "./Newsletter.ts"
import type { BrevoSettings, CallPolicy } from "./NewsletterConfig.ts"
import { parseJson, type ProviderAnswer, providerSubscribe, TransientFailure } from "./providerCall.ts"

/** Brevo's error body; `metadata` (added 2024) and anything else is ignored. */
const BrevoError = Schema.Struct({ code: Schema.String, message: Schema.String })
const decodeBrevoError = Schema.decodeUnknownOption(BrevoError)

const makeBrevo = (
  settings: BrevoSettings,
  policy: CallPolicy,
  client: HttpClient.HttpClient
): Newsletter["Service"] => {
  const url = `${settings.baseUrl}/contacts/doubleOptinConfirmation`

  const subscribe = (input: SubscribeInput): Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError> => {
    const request = HttpClientRequest.post(url).pipe(
      HttpClientRequest.setHeader("api-key", Redacted.value(settings.apiKey)),
      HttpClientRequest.acceptJson,
      HttpClientRequest.bodyJsonUnsafe({
        email: input.email,
        includeListIds: settings.listIds,
        templateId: settings.templates[input.locale],
        redirectionUrl: settings.redirectUrl,
        // Brevo has no language field; LOCALE is a custom attribute that must exist in the account.
        attributes: { LOCALE: input.locale }
      })
    )
    return providerSubscribe("brevo", input, policy, client, request, interpret)
  }

  return Newsletter.of({ provider: "brevo", subscribe })
}

/** Brevo as the Newsletter, on the application's HttpClient. */
export const layerBrevo = (settings: BrevoSettings, policy: CallPolicy): Layer.Layer<Newsletter, never, HttpClient.HttpClient> =>
  Layer.effect(Newsletter, Effect.map(HttpClient.HttpClient, (client) => makeBrevo(settings, policy, client)))

/** Maps one answer to an outcome or a typed failure (upstreams.md §3.6). */
const interpret = (
  answer: ProviderAnswer
): Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError | TransientFailure> => {
  const { status, body } = answer
  if (status === 201 || status === 204) {
    // Brevo answers with an empty body; anything else that is not JSON came from something in between
    // (a proxy or captive portal), so the contact may never have reached Brevo.
    if (body.trim() !== "" && parseJson(body) === undefined) {
      return Effect.fail(new NewsletterUpstreamError({ reason: `brevo answered ${status} with a body that is not JSON` }))
    }
    return Effect.succeed(status === 201 ? "pending" : "existing")
  }
  if (status >= 500) return Effect.fail(new TransientFailure({ reason: `brevo answered ${status}` }))
  const error = decodeBrevoError(parseJson(body))
  if (status === 400 && error._tag === "Some" && isInvalidEmail(error.value)) {
    return Effect.fail(new NewsletterInvalidEmail({ reason: error.value.message }))
  }
  const code = error._tag === "Some" ? ` (${error.value.code})` : ""
  const why = status === 401 || status === 403
    ? "our API key was refused"
    : status === 429
    ? "rate limited"
    : error._tag === "None"
    ? "unexpected body"
    : "request refused"
  return Effect.fail(new NewsletterUpstreamError({ reason: `brevo answered ${status}${code}: ${why}` }))
}

/**
 * Brevo's code says a parameter was invalid; only its message says which. Matching the word "email"
 * keeps a bad templateId, list id or redirectionUrl (our configuration's fault) a 502.
 */
const isInvalidEmail = (error: { readonly code: string; readonly message: string }): boolean =>
  error.code === "invalid_parameter" && /\bemail\b/i.test(error.message)
