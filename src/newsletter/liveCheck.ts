/**
 * The newsletter provider against the real thing, read-only (for `npm run smoke:live`): one call per
 * configured provider, read with its adapter's own schemas, and nobody subscribed. Brevo: GET
 * /account with the key. Listmonk: its lists, through the API user when there is one (GET /api/lists),
 * else the public ones (GET /api/public/lists), each of LISTMONK_LISTS looked for. Never fails: a
 * refusal, an unreadable answer or no answer is `ok: false` with what the provider said.
 */
import { Effect } from "effect"
import { HttpClient } from "effect/http"
import { accountUrl, readAccount } from "./brevo.ts"
import { listProblems, listsUrl, readLists } from "./listmonkLists.ts"
import type { CallPolicy, NewsletterConfigShape } from "./NewsletterConfig.ts"

interface LiveCheckResult {
  readonly provider: string
  /** Method and path, e.g. "GET /v3/account". */
  readonly call: string
  readonly ok: boolean
  readonly detail: string
}

const pathOf = (url: string): string => {
  const u = new URL(url)
  return `${u.pathname}${u.search}`
}

export const liveCheck = (config: NewsletterConfigShape): Effect.Effect<ReadonlyArray<LiveCheckResult>, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    // One call: a transient failure is reported, not retried.
    const policy: CallPolicy = { ...config.call, retries: 0 }
    switch (config.provider) {
      case "local":
        return []
      case "brevo": {
        const call = `GET ${pathOf(accountUrl(config.brevo))}`
        return [
          yield* readAccount(config.brevo, policy, client).pipe(
            Effect.match({
              onSuccess: (detail) => ({ provider: "brevo", call, ok: true, detail }),
              onFailure: (error) => ({ provider: "brevo", call, ok: false, detail: error.reason })
            })
          )
        ]
      }
      case "listmonk": {
        const settings = config.listmonk
        const apiUser = settings.apiUser
        const call = `GET ${pathOf(listsUrl(settings, apiUser))}`
        return [
          yield* readLists(settings, policy, client, apiUser).pipe(
            Effect.match({
              onSuccess: (lists) => {
                const problems = listProblems(settings, lists, apiUser)
                return problems.length === 0
                  ? { provider: "listmonk", call, ok: true, detail: `each list of LISTMONK_LISTS is there and public (${lists.length} read)` }
                  : { provider: "listmonk", call, ok: false, detail: problems.join("; ") }
              },
              onFailure: (error) => ({ provider: "listmonk", call, ok: false, detail: error.problem })
            })
          )
        ]
      }
    }
  })
