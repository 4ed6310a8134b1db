/**
 * GET/HEAD /widget.js (C10): the widget module (parts.js and widget.js beside this file, joined into one
 * module so that a page makes one request), read and encoded once when the app is built, served with a strong ETag per coding (304 on If-None-Match), a short public Cache-Control
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

const importOfParts = /^import \{[^}]*\} from "\.\/parts\.js"\n/m

/** parts.js, its `export`s made plain declarations, then widget.js without its import of them: one module. */
export const joinModules = (parts: string, widget: string): string => {
  if (!importOfParts.test(widget)) throw new Error("widget.js must import parts.js in one `import { ... } from \"./parts.js\"`")
  return `${parts.replace(/^export /gm, "")}\n${widget.replace(importOfParts, "")}`
}

export const WidgetHandlers = HttpApiBuilder.group(
  Api,
  "widget",
  Effect.fn(function*(handlers) {
    const { corsOrigins } = yield* AppConfig
    const [parts, widget] = yield* Effect.promise(() =>
      Promise.all(["./parts.js", "./widget.js"].map((file) => readFile(new URL(file, import.meta.url), "utf8"))))
    const script = yield* makeDocument(joinModules(parts!, widget!), {
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
