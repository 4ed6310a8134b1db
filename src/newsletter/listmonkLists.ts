/**
 * Listmonk's lists as the subscription needs them: each locale's list must exist and be public. The
 * public subscription skips a list UUID it does not know and answers 200 all the same (knadh/listmonk
 * cmd/public.go), so a deleted or mistyped list would lose that locale's sign-ups without a word; it
 * refuses a private one. Read through Listmonk's admin API with an API user (Listmonk 4+, `Authorization:
 * token user:token`), or through its public list of lists, which needs no credentials.
 */
import { Data, Effect, Option, Redacted, Schema } from "effect"
import { type HttpClient, HttpClientRequest } from "effect/http"
import type { NewsletterUpstreamError } from "./Newsletter.ts"
import type { CallPolicy, ListmonkApiUser, ListmonkSettings } from "./NewsletterConfig.ts"
import { callProvider, parseJson, type ProviderAnswer, TransientFailure } from "./providerCall.ts"

/** A list as both endpoints show it; the public one shows public lists only, without their type. */
interface ListmonkList {
  readonly uuid: string
  readonly name: string
  readonly type: string
}

const AdminList = Schema.Struct({ uuid: Schema.String, name: Schema.String, type: Schema.String })
/** GET /api/lists?minimal=true (cmd/lists.go GetLists): a page of every list, or `"data": []` when none. */
const AdminLists = Schema.Struct({
  data: Schema.Union([Schema.Struct({ results: Schema.Array(AdminList) }), Schema.Tuple([])])
})
const decodeAdminLists = Schema.decodeUnknownOption(AdminLists)
/** GET /api/public/lists (cmd/public.go GetPublicLists): the public, active lists. */
const PublicLists = Schema.Array(Schema.Struct({ uuid: Schema.String, name: Schema.String }))
const decodePublicLists = Schema.decodeUnknownOption(PublicLists)
/** Echo's error body. */
const decodeMessage = Schema.decodeUnknownOption(Schema.Struct({ message: Schema.String }))

/**
 * The lists could not be read: `problem` names the variable to fix first; `configuration` says its value
 * is wrong (Listmonk answered and refused it), rather than Listmonk being out of reach.
 */
class ListsUnread extends Data.TaggedError("ListsUnread")<{
  readonly problem: string
  readonly configuration: boolean
}> {}

/** The URL as it may be shown: without credentials a URL could carry. */
const shown = (url: string): string => {
  const u = new URL(url)
  u.username = ""
  u.password = ""
  return u.href.replace(/\/+$/, "")
}

/**
 * Every list the API user may read (the minimal form: no subscriber counts to compute), or without
 * one the public lists.
 */
export const listsUrl = (settings: ListmonkSettings, apiUser: ListmonkApiUser | undefined): string =>
  `${settings.url}${apiUser === undefined ? "/api/public/lists" : "/api/lists?minimal=true&per_page=all"}`

const listsRequest = (settings: ListmonkSettings, apiUser: ListmonkApiUser | undefined) => {
  const request = HttpClientRequest.get(listsUrl(settings, apiUser)).pipe(HttpClientRequest.acceptJson)
  return apiUser === undefined
    ? request
    : HttpClientRequest.setHeader(request, "authorization", `token ${apiUser.user}:${Redacted.value(apiUser.token)}`)
}

/** Reads either answer: the lists, or what to fix. */
const interpretLists = (settings: ListmonkSettings, apiUser: ListmonkApiUser | undefined) =>
(answer: ProviderAnswer): Effect.Effect<ReadonlyArray<ListmonkList>, ListsUnread | TransientFailure> => {
  const { status, body } = answer
  const where = shown(listsUrl(settings, apiUser))
  if (status >= 500) return Effect.fail(new TransientFailure({ reason: `${where} answered ${status}` }))
  const said = decodeMessage(parseJson(body))
  const words = said._tag === "Some" ? `: ${said.value.message.slice(0, 200)}` : ""
  if (status === 200) {
    const json = parseJson(body)
    const lists: Option.Option<ReadonlyArray<ListmonkList>> = apiUser === undefined
      ? Option.map(decodePublicLists(json), (ls) => ls.map((l) => ({ ...l, type: "public" })))
      : Option.map(decodeAdminLists(json), ({ data }) => "results" in data ? data.results : [])
    if (Option.isSome(lists)) return Effect.succeed(lists.value)
    return Effect.fail(
      new ListsUnread({
        problem: `LISTMONK_URL: ${where} answered 200 with a body that is not Listmonk's lists (a proxy or login page in between?)`,
        configuration: false
      })
    )
  }
  if ((status === 401 || status === 403) && apiUser !== undefined) {
    return Effect.fail(
      new ListsUnread({
        problem: `LISTMONK_API_TOKEN: Listmonk at ${shown(settings.url)} refused LISTMONK_API_USER "${apiUser.user}" and ` +
          `this token (${status}${words}); give a Listmonk 4+ API user's name and token`,
        configuration: true
      })
    )
  }
  return Effect.fail(
    new ListsUnread({
      problem: status === 404
        ? `LISTMONK_URL: ${where} answered 404; LISTMONK_URL must be the root of Listmonk (4 or later for API users)`
        : `LISTMONK_URL: ${where} answered ${status}${words}`,
      configuration: status === 404
    })
  )
}

/**
 * Every list Listmonk shows: all the API user may read with one, else the public ones. One call under
 * `policy`; Listmonk out of reach is a `ListsUnread` naming LISTMONK_URL.
 */
export const readLists = (
  settings: ListmonkSettings,
  policy: CallPolicy,
  client: HttpClient.HttpClient,
  apiUser: ListmonkApiUser | undefined
): Effect.Effect<ReadonlyArray<ListmonkList>, ListsUnread> => {
  const request = listsRequest(settings, apiUser)
  return callProvider("listmonk", policy, client, request, interpretLists(settings, apiUser)).pipe(
    Effect.catchTag("NewsletterUpstreamError", (error: NewsletterUpstreamError) =>
      Effect.fail(
        new ListsUnread({
          problem: `LISTMONK_URL: Listmonk at ${shown(settings.url)} could not be read (${error.reason})`,
          configuration: false
        })
      ))
  )
}

/**
 * One line per locale whose list is missing or private (LISTMONK_LISTS named first), none when all
 * are fine; `apiUser` is whoever read them (none: the public lists).
 */
export const listProblems = (
  settings: ListmonkSettings,
  lists: ReadonlyArray<ListmonkList>,
  apiUser: ListmonkApiUser | undefined
): ReadonlyArray<string> =>
  Object.entries(settings.lists).flatMap(([locale, uuid]) => {
    const list = lists.find((l) => l.uuid.toLowerCase() === uuid)
    if (list === undefined) {
      const among = apiUser === undefined
        ? "the public lists (deleted, mistyped, private or archived)"
        : `the lists LISTMONK_API_USER "${apiUser.user}" may read (deleted, mistyped, or not permitted to that user)`
      return [
        `LISTMONK_LISTS: ${locale}:${uuid} is not among ${among} at ${shown(settings.url)}; Listmonk would take ` +
        `every ${locale} sign-up into no list`
      ]
    }
    if (list.type !== "public") {
      return [
        `LISTMONK_LISTS: ${locale}:${uuid} ("${list.name}") is a ${list.type} list, not open to the public ` +
        `subscription (Listmonk 5 refuses it): make it public or name a public list`
      ]
    }
    return []
  })
