/**
 * HTTP binding of the OAuth capability (CONTRACT C6). The token endpoint reads the raw form itself
 * (RFC 6749 wants duplicates refused and unknown parameters ignored, which a schema decode cannot
 * tell apart) and answers application/json with the OAuth and problem members together.
 */
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { clientIp } from "../http/clientIp.ts"
import { CurrentRequestId } from "../http/requestId.ts"
import { discoveryDocument } from "./discovery.ts"
import { SigningKeys } from "./SigningKeys.ts"
import { TokenEndpoint } from "./TokenEndpoint.ts"

export const OAuthHandlers = HttpApiBuilder.group(
  Api,
  "oauth",
  Effect.fn(function*(handlers) {
    const config = yield* AppConfig
    const tokens = yield* TokenEndpoint
    const keys = yield* SigningKeys
    const metadata = discoveryDocument(config)
    const publicDocument = { "cache-control": "public, max-age=300" }
    return handlers
      .handleRaw("requestToken", ({ request }) =>
        Effect.gen(function*() {
          const body = yield* request.text
          const answer = yield* tokens.handle({
            authorization: request.headers["authorization"],
            contentType: request.headers["content-type"],
            body,
            clientIp: clientIp(request),
            requestId: yield* CurrentRequestId
          })
          return HttpServerResponse.text(answer.body, {
            status: answer.status,
            headers: answer.headers,
            contentType: "application/json"
          })
        }).pipe(Effect.orDie))
      .handle("getAuthorizationServerMetadata", () =>
        Effect.succeed(HttpServerResponse.jsonUnsafe(metadata, { headers: publicDocument })))
      .handle("getJwks", () =>
        Effect.map(keys.jwks(), (jwks) => HttpServerResponse.jsonUnsafe(jwks, { headers: publicDocument })))
  })
)
