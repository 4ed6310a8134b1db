/**
 * Brevo double opt-in (docs/upstreams.md §5, §7): `POST {base}/contacts/doubleOptinConfirmation`.
 * 201 "DOI contact created" and 204 "DOI contact updated" both answer 200 upstream of us (no
 * enumeration), and so does Brevo's refusal of an address it keeps on file (a blocklisted or another
 * contact's, CONTRACT C5 amended); only Brevo's own verdict that the address is invalid becomes
 * invalid_email. A refusal of us (key, IP address) carries Brevo's own words.
 */
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import {
  Newsletter,
  NewsletterInvalidEmail,
  NewsletterUpstreamError,
  type SubscribeInput,
  type SubscribeOutcome
} from "./Newsletter.ts"
import type { BrevoSettings, CallPolicy } from "./NewsletterConfig.ts"
import { callProvider, parseJson, type ProviderAnswer, providerSubscribe, TransientFailure } from "./providerCall.ts"

/** Brevo's error body; of `metadata` (added 2024) only the identifiers a duplicate names are read. */
const BrevoError = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  metadata: Schema.optional(Schema.Struct({ duplicate_identifiers: Schema.optional(Schema.Array(Schema.String)) }))
})
type BrevoError = typeof BrevoError.Type
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

/** Maps one answer to an outcome or a typed failure (docs/upstreams.md §7). */
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
  if (status === 400 && error._tag === "Some" && isOnFile(error.value)) {
    // Nobody is told the address is known; re-subscribing needs Brevo's own flow (docs/upstreams.md §7).
    return Effect.as(
      Effect.logInfo("brevo keeps the address on file (blocklisted or another contact's); answered as an existing one", error.value.message),
      "existing"
    )
  }
  if (status === 400 && error._tag === "Some" && isInvalidEmail(error.value)) {
    return Effect.fail(new NewsletterInvalidEmail({ reason: error.value.message }))
  }
  return Effect.fail(refusal(status, error))
}

/** Brevo's words say what to fix (a key not found, an IP address to authorise, a template or list). */
const refusal = (status: number, error: Option.Option<BrevoError>): NewsletterUpstreamError =>
  new NewsletterUpstreamError({
    reason: status === 429
      ? "brevo answered 429: rate limited"
      : Option.isSome(error)
      ? `brevo answered ${status} (${error.value.code}): ${error.value.message.slice(0, 300)}`
      : `brevo answered ${status}: ${status === 401 || status === 403 ? "access refused" : "unexpected body"}`
  })

/** GET /account (developers.brevo.com get-account): only what the live check reports is read. */
const BrevoAccount = Schema.Struct({ plan: Schema.Array(Schema.Struct({ type: Schema.String })) })
const decodeAccount = Schema.decodeUnknownOption(BrevoAccount)

export const accountUrl = (settings: BrevoSettings): string => `${settings.baseUrl}/account`

/**
 * One read-only call with the key (the live check): the account's plan, or Brevo's refusal in its own
 * words. Nothing is subscribed.
 */
export const readAccount = (
  settings: BrevoSettings,
  policy: CallPolicy,
  client: HttpClient.HttpClient
): Effect.Effect<string, NewsletterUpstreamError> => {
  const request = HttpClientRequest.get(accountUrl(settings)).pipe(
    HttpClientRequest.setHeader("api-key", Redacted.value(settings.apiKey)),
    HttpClientRequest.acceptJson
  )
  return callProvider("brevo", policy, client, request, ({ status, body }) => {
    if (status >= 500) return Effect.fail(new TransientFailure({ reason: `brevo answered ${status}` }))
    if (status !== 200) return Effect.fail(refusal(status, decodeBrevoError(parseJson(body))))
    const account = decodeAccount(parseJson(body))
    return Option.isSome(account)
      ? Effect.succeed(`the key is accepted; plan ${account.value.plan.map((p) => p.type).join(", ") || "none"}`)
      : Effect.fail(new NewsletterUpstreamError({ reason: "brevo answered 200 with a body that is not an account" }))
  })
}

/**
 * Brevo refuses a contact it already holds under another identity, or keeps on its blocklist (an
 * unsubscribe): `duplicate_identifiers` names the e-mail, or the message says it is "already
 * associated" (the recorded forms: test/emulators/brevo.ts BlocklistedAnswers).
 */
const isOnFile = (error: BrevoError): boolean =>
  (error.code === "duplicate_parameter" || error.code === "invalid_parameter") &&
  (error.metadata?.duplicate_identifiers?.includes("email") === true || /\balready (associated|exists?)\b/i.test(error.message))

/**
 * Brevo's code says a parameter was invalid; only its message says which, and that the address itself
 * is the fault ("email is not valid", "Invalid email address"): a bad templateId, list id or
 * redirectionUrl (our configuration's fault) stays a 502.
 */
const isInvalidEmail = (error: BrevoError): boolean =>
  error.code === "invalid_parameter" && /^(email( address)? is (not valid|invalid)|invalid email( address)?)\b/i.test(error.message.trim())
