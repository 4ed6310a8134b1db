/**
 * Documents served beside the API: the OpenAPI document, the interactive reference (Scalar, bundled
 * inline so it works offline) and one human-readable page per problem type (`/problems/{code}`).
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiScalar, OpenApi } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NotFound, ProblemCatalogue, type ProblemCode, problemCodes } from "../api/problems.ts"
import { AppConfig } from "../config.ts"

/** The generated document with problem `type` URIs made absolute for this deployment (C7). */
export const openApiDocument = (publicBaseUrl: string) =>
  JSON.parse(JSON.stringify(OpenApi.fromApi(Api)).replaceAll("\"/problems/", `"${publicBaseUrl}/problems/`))

const escapeHtml = (s: string) =>
  s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll("\"", "&quot;")

const problemPage = (code: ProblemCode, baseUrl: string) => {
  const p = ProblemCatalogue[code]
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(p.title)} (${p.status})</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; line-height: 1.5">
<h1>${escapeHtml(p.title)}</h1>
<dl>
<dt>Type</dt><dd><code>${escapeHtml(`${baseUrl}/problems/${code}`)}</code></dd>
<dt>Code</dt><dd><code>${code}</code></dd>
<dt>HTTP status</dt><dd>${p.status}</dd>
<dt>What happened</dt><dd>${escapeHtml(p.detail)}</dd>
<dt>What to do</dt><dd>${escapeHtml(p.resolution)}</dd>
</dl>
<p>Problem bodies are <code>application/problem+json</code> (RFC 9457). See the <a href="/docs">API reference</a>.</p>
</body></html>`
}

const cacheable = { "cache-control": "public, max-age=300" }

export const DocumentRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  const openapi = HttpServerResponse.jsonUnsafe(openApiDocument(config.publicBaseUrl), { headers: cacheable })
  const pages = new Map(problemCodes.map((code) => [code, problemPage(code, config.publicBaseUrl)]))
  return Layer.mergeAll(
    HttpRouter.add("GET", "/openapi.json", openapi),
    HttpRouter.add(
      "GET",
      "/problems/:code",
      Effect.flatMap(HttpRouter.params, (params) => {
        const page = params.code === undefined ? undefined : pages.get(params.code as ProblemCode)
        // NotFound renders itself as a problem; the edge completes it like any other.
        return page === undefined
          ? Effect.fail(new NotFound({ detail: "There is no problem type with this code." }))
          : Effect.succeed(HttpServerResponse.html(page).pipe(HttpServerResponse.setHeaders(cacheable)))
      })
    ),
    // Fonts off: the page must work offline, from the bundled script alone.
    HttpApiScalar.layer(Api, { path: "/docs", scalar: { defaultOpenAllTags: true, withDefaultFonts: false, showOperationId: true } })
  )
}))
