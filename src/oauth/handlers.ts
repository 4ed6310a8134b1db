/**
 * HTTP binding of the OAuth capability (CONTRACT C6). The token endpoint reads the raw form itself
 * (RFC 6749 wants duplicates refused and unknown parameters ignored, which a schema decode cannot
 * tell apart) and answers application/json with the OAuth and problem members together.
 */
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { refusalResponse } from "../api/tokenResponse.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { clientIp } from "../http/clientIp.ts"
import { asHttpResponse } from "../http/problemResponse.ts"
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
          const requestId = yield* CurrentRequestId
          const body = yield* Effect.result(request.text)
          if (body._tag === "Failure") {
            const { reason } = body.failure
            // A chunked body over the limit, which the edge cannot see in the headers (C6: OAuth form).
            if (reason._tag !== "RequestParseError" || reason.reason !== "BodyTooLarge") return yield* Effect.die(body.failure)
            return asHttpResponse(refusalResponse({ publicBaseUrl: config.publicBaseUrl, requestId }, "payload_too_large"))
          }
          const answer = yield* tokens.handle({
            authorization: request.headers["authorization"],
            contentType: request.headers["content-type"],
            contentEncoding: request.headers["content-encoding"],
            body: body.success,
            clientIp: clientIp(request),
            requestId
          })
          return asHttpResponse(answer)
        }))
      .handle("getAuthorizationServerMetadata", () =>
        Effect.succeed(HttpServerResponse.jsonUnsafe(metadata, { headers: publicDocument })))
      .handle("getJwks", () =>
        Effect.map(keys.jwks(), (jwks) => HttpServerResponse.jsonUnsafe(jwks, { headers: publicDocument })))
  })
)
