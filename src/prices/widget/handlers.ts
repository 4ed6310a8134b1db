/**
 * GET/HEAD /widget.js (C10): the widget module (widget.js beside this file), read and encoded once when the
 * app is built, served with a strong ETag per coding (304 on If-None-Match), a short public Cache-Control
 * (the URL is not versioned, so a change reaches pages within minutes) and the header that lets a page of
 * another origin load it. CORS comes from the edge, as for every public operation.
 */
import { readFile } from "node:fs/promises"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../../api/Api.ts"
import { AppConfig } from "../../config/AppConfig.ts"
import { makeDocument } from "../../http/documentResponse.ts"

/** Five minutes fresh, then a day served while revalidated in the background: a 304 costs a header comparison. */
const widgetCacheControl = "public, max-age=300, stale-while-revalidate=86400"

export const WidgetHandlers = HttpApiBuilder.group(
  Api,
  "widget",
  Effect.fn(function*(handlers) {
    const { corsOrigins } = yield* AppConfig
    const source = yield* Effect.promise(() => readFile(new URL("./widget.js", import.meta.url)))
    const script = yield* makeDocument(source, {
      contentType: "text/javascript; charset=utf-8",
      cacheControl: widgetCacheControl,
      headers: {
        // A module script of another origin is fetched in CORS mode, and pages may send
        // Cross-Origin-Embedder-Policy: both need the resource to say it may be embedded anywhere.
        "cross-origin-resource-policy": "cross-origin",
        // These replace the edge's `Vary: Origin`, which it sets when CORS_ORIGINS lists origins.
        vary: corsOrigins === "*" ? "Accept-Encoding" : "Accept-Encoding, Origin"
      }
    })
    return handlers.handle("getWidget", () => Effect.map(Effect.service(HttpServerRequest.HttpServerRequest), script.respond))
  })
)
