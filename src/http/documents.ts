/**
 * Documents served beside the API: the OpenAPI document, the interactive reference (Scalar, bundled
 * inline so it works offline) and one human-readable page per problem type (`/problems/{code}`).
 */
import { Effect, Layer, Scope } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiScalar, OpenApi } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NotFound, ProblemCatalogue, problemCodes, type ProblemInfo } from "../api/problems.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { documentPaths } from "./documentRoutes.ts"
import { ProbeRoutes } from "./probes.ts"
import { TokenErrorTitles } from "../oauth/TokenEndpoint.ts"

/** The generated document with problem `type` URIs made absolute for this deployment (C7). */
export const openApiDocument = (publicBaseUrl: string) =>
  JSON.parse(JSON.stringify(OpenApi.fromApi(Api)).replaceAll("\"/problems/", `"${publicBaseUrl}/problems/`))

const escapeHtml = (s: string) =>
  s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll("\"", "&quot;")

/** The token endpoint's RFC 6749 error codes, which are problem types too (CONTRACT C6). */
const oauthProblems: ReadonlyArray<ProblemInfo> = [
  {
    code: "invalid_request",
    status: 400,
    title: TokenErrorTitles.invalid_request,
    detail: "The token request is malformed: a parameter is missing or repeated, the body is not form-encoded, or the credentials are not in HTTP Basic alone.",
    resolution: "POST grant_type=client_credentials as application/x-www-form-urlencoded, with the client id and secret in HTTP Basic."
  },
  {
    code: "invalid_client",
    status: 401,
    title: TokenErrorTitles.invalid_client,
    detail: "The client id and secret were not accepted.",
    resolution: "Check the credentials the operator issued (form-urlencode id and secret before base64), or ask for new ones."
  },
  {
    code: "unsupported_grant_type",
    status: 400,
    title: TokenErrorTitles.unsupported_grant_type,
    detail: "Only the client_credentials grant is supported.",
    resolution: "Send grant_type=client_credentials."
  },
  {
    code: "invalid_scope",
    status: 400,
    title: TokenErrorTitles.invalid_scope,
    detail: "The requested scope is unknown, malformed or not granted to this client.",
    resolution: "Request a space-delimited subset of the client's scopes, or omit scope to get all of them."
  }
]

const problemPage = (p: ProblemInfo, baseUrl: string) => {
  const code = p.code
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

/**
 * The interactive reference, built on its first request (about 0.3 s, once): HttpApiScalar loads its
 * bundled script (3.2 MB of source) when its Layer is built and the page inlines it, some 15-20 MB of
 * resident memory that an instance which never serves /docs should not carry.
 */
const ScalarDocs = HttpRouter.use((router) =>
  Effect.gen(function*() {
    // The routes' scope: the page lives as long as the server.
    const scope = yield* Effect.scope
    const page = yield* Effect.cached(
      HttpRouter.toHttpEffect(
        // Fonts off: the page must work offline, from the bundled script alone.
        HttpApiScalar.layer(Api, { path: documentPaths.docs, scalar: { defaultOpenAllTags: true, withDefaultFonts: false, showOperationId: true } })
      ).pipe(Scope.provide(scope))
    )
    yield* router.add("GET", documentPaths.docs, Effect.flatten(page))
  })
)

export const DocumentRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  const openapi = HttpServerResponse.jsonUnsafe(openApiDocument(config.publicBaseUrl), { headers: cacheable })
  const pages = new Map<string, string>(
    [...problemCodes.map((code) => ProblemCatalogue[code]), ...oauthProblems].map((p) => [p.code, problemPage(p, config.publicBaseUrl)])
  )
  return Layer.mergeAll(
    HttpRouter.add("GET", documentPaths.openapi, openapi),
    HttpRouter.add(
      "GET",
      documentPaths.problem,
      Effect.flatMap(HttpRouter.params, (params) => {
        const page = params.code === undefined ? undefined : pages.get(params.code)
        // NotFound renders itself as a problem; the edge completes it like any other.
        return page === undefined
          ? Effect.fail(new NotFound({ detail: "There is no problem type with this code." }))
          : Effect.succeed(HttpServerResponse.html(page).pipe(HttpServerResponse.setHeaders(cacheable)))
      })
    ),
    ScalarDocs,
    ProbeRoutes
  )
}))
