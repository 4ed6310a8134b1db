/**
 * Listmonk public subscription (docs/upstreams.md §6, §7): `POST {url}/api/public/subscription`.
 * An address already on file is not an error there: its lists are updated and `has_optin` is false,
 * so the call is idempotent and reveals nothing to the caller. A list UUID Listmonk does not know gets
 * the same 200 and subscribes to nothing, which no answer shows: so with an API user the lists are
 * checked before the service starts (listmonkLists.ts), and without one a warning says they are not.
 */
import { Effect, Layer, Schema } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { ConfigInvalid } from "../config/ConfigInvalid.ts"
import { StartupFailure } from "../lifecycle/StartupFailure.ts"
import { listProblems, readLists } from "./listmonkLists.ts"
import {
  Newsletter,
  NewsletterInvalidEmail,
  NewsletterUpstreamError,
  type SubscribeInput,
  type SubscribeOutcome
} from "./Newsletter.ts"
import type { CallPolicy, ListmonkSettings } from "./NewsletterConfig.ts"
import { parseJson, type ProviderAnswer, providerSubscribe, TransientFailure } from "./providerCall.ts"

/** `{"data": {"has_optin": boolean}}` (knadh/listmonk cmd/public.go PublicSubscription). */
const ListmonkSubscribed = Schema.Struct({ data: Schema.Struct({ has_optin: Schema.Boolean }) })
const decodeSubscribed = Schema.decodeUnknownOption(ListmonkSubscribed)
/** Echo's error body: `{"message": "..."}`. */
const ListmonkError = Schema.Struct({ message: Schema.String })
const decodeError = Schema.decodeUnknownOption(ListmonkError)

const makeListmonk = (
  settings: ListmonkSettings,
  policy: CallPolicy,
  client: HttpClient.HttpClient
): Newsletter["Service"] => {
  const url = `${settings.url}/api/public/subscription`

  const subscribe = (input: SubscribeInput): Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError> => {
    const request = HttpClientRequest.post(url).pipe(
      HttpClientRequest.acceptJson,
      HttpClientRequest.bodyJsonUnsafe({
        email: input.email,
        // Listmonk would use the local part itself when empty; sending it keeps the record explicit.
        name: input.email.slice(0, input.email.lastIndexOf("@")),
        list_uuids: [settings.lists[input.locale]]
      })
    )
    return providerSubscribe("listmonk", input, policy, client, request, interpret)
  }

  return Newsletter.of({ provider: "listmonk", subscribe })
}

/**
 * With an API user, every list of LISTMONK_LISTS must exist and be public, or the start is refused
 * naming the variable (as any bad configuration); Listmonk refusing the token, or out of reach within
 * the call policy's deadline, refuses it too. Without one, a warning.
 */
const checkLists = (
  settings: ListmonkSettings,
  policy: CallPolicy,
  client: HttpClient.HttpClient
): Effect.Effect<void, ConfigInvalid | StartupFailure> => {
  const apiUser = settings.apiUser
  if (apiUser === undefined) {
    return Effect.logWarning(
      "LISTMONK_LISTS cannot be checked at start-up without LISTMONK_API_USER and LISTMONK_API_TOKEN: a list that is " +
        "deleted, mistyped or private would lose its locale's sign-ups unseen; give a Listmonk 4+ API user to check them"
    )
  }
  return readLists(settings, policy, client, apiUser).pipe(
    Effect.mapError((error) =>
      error.configuration
        ? new ConfigInvalid({ problems: [error.problem] })
        : new StartupFailure({
          problem: `${error.problem}; start Listmonk or fix LISTMONK_URL (without LISTMONK_API_USER and ` +
            "LISTMONK_API_TOKEN the lists are not checked)"
        })
    ),
    Effect.flatMap((lists) => {
      const problems = listProblems(settings, lists, apiUser)
      return problems.length > 0
        ? Effect.fail(new ConfigInvalid({ problems }))
        : Effect.logInfo("listmonk: every list of LISTMONK_LISTS exists and is public")
    })
  )
}

/** Listmonk as the Newsletter, on the application's HttpClient, once its lists are checked. */
export const layerListmonk = (
  settings: ListmonkSettings,
  policy: CallPolicy
): Layer.Layer<Newsletter, ConfigInvalid | StartupFailure, HttpClient.HttpClient> =>
  Layer.effect(
    Newsletter,
    Effect.gen(function*() {
      const client = yield* HttpClient.HttpClient
      yield* checkLists(settings, policy, client)
      return makeListmonk(settings, policy, client)
    })
  )

const interpret = (
  answer: ProviderAnswer
): Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError | TransientFailure> => {
  const { status, body } = answer
  if (status === 200) {
    const ok = decodeSubscribed(parseJson(body))
    if (ok._tag === "None") {
      return Effect.fail(new NewsletterUpstreamError({ reason: "listmonk answered 200 with an unexpected body" }))
    }
    // has_optin is true when a double opt-in e-mail went out: a new (or still unconfirmed) subscriber.
    // False means the address was already on file (its lists were updated), or the list is single opt-in.
    return Effect.succeed(ok.value.data.has_optin ? "pending" : "existing")
  }
  if (status >= 500) return Effect.fail(new TransientFailure({ reason: `listmonk answered ${status}` }))
  const error = decodeError(parseJson(body))
  if (status === 400 && error._tag === "Some" && isInvalidEmail(error.value.message)) {
    return Effect.fail(new NewsletterInvalidEmail({ reason: error.value.message }))
  }
  const why = status === 401 || status === 403
    ? "access refused"
    : status === 429
    ? "rate limited"
    : error._tag === "None"
    ? "unexpected body"
    // e.g. "That feature is not available." (public subscription disabled), "Invalid UUID(s)", CAPTCHA.
    : `request refused: ${error.value.message.slice(0, 120)}`
  return Effect.fail(new NewsletterUpstreamError({ reason: `listmonk answered ${status}: ${why}` }))
}

/**
 * Listmonk has no error codes, only i18n messages: "Invalid email." (subscribers.invalidEmail) and
 * "Domain is blocklisted." (subscribers.domainBlocklisted) in English, or the bare key when a
 * translation is missing. An instance running in another language falls back to a 502.
 */
const isInvalidEmail = (message: string): boolean =>
  /invalid e-?mail|subscribers\.invalidEmail|domain is blocklisted|subscribers\.domainBlocklisted/i.test(message)
