/**
 * The typed client for integrators, derived from the same HttpApi as the server. Errors come back as
 * the problem classes of src/api/problems.ts (`UpstreamError`, `ServiceUnavailable`, ...).
 *
 *   const client = yield* makeApiClient({ baseUrl: "https://api.example.com" })
 *   const rates = yield* client.getHistoricalExchangeRates({ payload: { cryptos: ["BTC"] } })
 */
import { Effect } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { Api } from "./api/Api.ts"

export { Api } from "./api/Api.ts"
export * from "./api/problems.ts"
export * from "./api/schemas.ts"

/**
 * The server sends absolute problem `type` URIs (PUBLIC_BASE_URL/problems/<code>); the contract
 * declares them relative, so they are made relative again before the problem classes decode them.
 */
const relativeProblemTypes = (response: HttpClientResponse.HttpClientResponse) => {
  if (!(response.headers["content-type"] ?? "").startsWith("application/problem+json")) {
    return Effect.succeed(response)
  }
  return Effect.map(response.text, (text) => {
    let body = text
    try {
      const json = JSON.parse(text)
      if (typeof json?.type === "string") {
        const at = json.type.indexOf("/problems/")
        if (at > 0) json.type = json.type.slice(at)
      }
      body = JSON.stringify(json)
    } catch {
      // not JSON after all: let the decoder report it
    }
    return HttpClientResponse.fromWeb(
      response.request,
      new Response(body, { status: response.status, headers: response.headers as Record<string, string> })
    )
  })
}

export const makeApiClient = (options: { readonly baseUrl: string; readonly accessToken?: string }) =>
  HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    transformClient: (client) => {
      const withProblems = HttpClient.transformResponse(client, Effect.flatMap(relativeProblemTypes))
      const token = options.accessToken
      return token === undefined
        ? withProblems
        : HttpClient.mapRequest(withProblems, HttpClientRequest.bearerToken(token))
    }
  })
