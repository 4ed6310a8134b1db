/**
 * Documents served beside the API: the OpenAPI document, the interactive reference (docsPage.ts),
 * one page per problem type and their index (HTML, or JSON for `Accept: application/json`), `/` and
 * `/docs/` redirects, the favicon, and the probes. Every document is encoded once (documentResponse.ts):
 * compressed when accepted, strong ETag, cacheable; HTML pages carry a Content-Security-Policy (C9).
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { OpenApi } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { NotFound, ProblemCatalogue, problemCodes, ProblemExamples, type ProblemInfo } from "../api/problems.ts"
import { TokenErrorTitles } from "../api/tokenResponse.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { docsContentSecurityPolicy, docsPage, docsStartScript, loadScalarScript } from "./docsPage.ts"
import { type Document, makeDocument, respondWith } from "./documentResponse.ts"
import { documentPaths } from "./documentRoutes.ts"
import { ProbeRoutes } from "./probes.ts"

type Json = Record<string, any>

/**
 * The generated document as this deployment serves it: its address as the server and contact, problem
 * `type` URIs absolute (C7), problem
 * schemas under their own names (the generator calls them `...Encoded`), each with an example, and
 * integers without the generator's ±(2^53 - 1) bounds, which reference pages turned into examples.
 */
const openApiDocument = (publicBaseUrl: string): Json => {
  const source = JSON.stringify(OpenApi.fromApi(Api))
    .replaceAll("\"/problems/", `"${publicBaseUrl}/problems/`)
    .replace(/"(#\/components\/schemas\/\w+)Encoded"/g, "\"$1\"")
    .replace(/,"(minimum|maximum)":-?9007199254740991/g, "")
  const doc = JSON.parse(source)
  const schemas: Json = {}
  for (const [name, schema] of Object.entries<Json>(doc.components?.schemas ?? {})) {
    const code: unknown = schema.properties?.code?.enum?.[0]
    const problem = typeof code === "string" && code in ProblemCatalogue ? code as keyof typeof ProblemCatalogue : undefined
    schemas[name.replace(/Encoded$/, "")] = problem === undefined ? schema : { ...schema, examples: [problemExample(problem, publicBaseUrl)] }
  }
  // The generic shape of every problem: shown with the commonest one.
  if (schemas.ProblemDetails !== undefined) {
    schemas.ProblemDetails = { ...schemas.ProblemDetails, examples: [problemExample("not_found", publicBaseUrl)] }
  }
  return {
    ...doc,
    // This deployment's address: the document is served per configuration.
    info: { ...doc.info, contact: { name: "API operator (credentials, support)", url: `${publicBaseUrl}/docs` } },
    servers: [{ url: publicBaseUrl, description: "This deployment (PUBLIC_BASE_URL)" }],
    components: { ...doc.components, schemas }
  }
}

const problemExample = (code: keyof typeof ProblemCatalogue, baseUrl: string) => {
  const p = ProblemCatalogue[code]
  return {
    type: `${baseUrl}/problems/${code}`,
    title: p.title,
    status: p.status,
    detail: p.detail,
    instance: "urn:uuid:3b241101-e2bb-4255-8caf-4136c566a962",
    code,
    resolution: p.resolution,
    ...ProblemExamples[code]
  }
}

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

const pageStyle = "body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;line-height:1.5}"

const htmlPage = (title: string, body: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${pageStyle}</style></head>
<body>
${body}
</body></html>
`

const problemPage = (p: ProblemInfo, baseUrl: string) =>
  htmlPage(
    `${p.title} (${p.status})`,
    `<h1>${escapeHtml(p.title)}</h1>
<dl>
<dt>Type</dt><dd><code>${escapeHtml(`${baseUrl}/problems/${p.code}`)}</code></dd>
<dt>Code</dt><dd><code>${escapeHtml(p.code)}</code></dd>
<dt>HTTP status</dt><dd>${p.status}</dd>
<dt>What happened</dt><dd>${escapeHtml(p.detail)}</dd>
<dt>What to do</dt><dd>${escapeHtml(p.resolution)}</dd>
</dl>
<p>Problem bodies are <code>application/problem+json</code> (RFC 9457). See <a href="/problems">every problem type</a> and the <a href="/docs">API reference</a>.</p>`
  )

const problemIndex = (problems: ReadonlyArray<ProblemInfo>) =>
  htmlPage(
    "Problem types",
    `<h1>Problem types</h1>
<p>Every error body of the API is a problem (RFC 9457) whose <code>type</code> is one of these pages.</p>
<ul>
${problems.map((p) => `<li><a href="/problems/${escapeHtml(p.code)}"><code>${escapeHtml(p.code)}</code></a> (${p.status}): ${escapeHtml(p.title)}</li>`).join("\n")}
</ul>
<p>See the <a href="/docs">API reference</a>.</p>`
  )

const catalogueEntry = (p: ProblemInfo, baseUrl: string) => ({
  type: `${baseUrl}/problems/${p.code}`,
  code: p.code,
  status: p.status,
  title: p.title,
  detail: p.detail,
  resolution: p.resolution
})

/** Problem pages: no script at all; their one style sheet inline. */
const pageContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

const html = "text/html; charset=utf-8"
const json = "application/json"
const documentCache = "public, max-age=300"

/** JSON when the client ranks it above HTML (Accept, RFC 9110 §12.5.1); HTML for browsers and by default. */
const prefersJson = (accept: string | undefined) => {
  if (accept === undefined) return false
  let jsonQ = 0
  let htmlQ = 0
  for (const part of accept.split(",")) {
    const [range, ...params] = part.trim().toLowerCase().split(";")
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="))
    const weight = q === undefined ? 1 : Number(q.slice(2)) || 0
    if (range === "application/json" || range === "application/problem+json") jsonQ = Math.max(jsonQ, weight)
    if (range === "text/html") htmlQ = Math.max(htmlQ, weight)
  }
  return jsonQ > htmlQ
}

/** The HTML page and its JSON twin, chosen by Accept. */
const negotiated = (page: string, entry: unknown) =>
  Effect.all({
    html: makeDocument(page, {
      contentType: html,
      cacheControl: documentCache,
      headers: { "content-security-policy": pageContentSecurityPolicy, vary: "Accept, Accept-Encoding" }
    }),
    json: makeDocument(JSON.stringify(entry), { contentType: json, cacheControl: documentCache, headers: { vary: "Accept, Accept-Encoding" } })
  })

const respondNegotiated = (pair: { readonly html: Document; readonly json: Document }) =>
  Effect.map(
    Effect.service(HttpServerRequest.HttpServerRequest),
    (request) => (prefersJson(request.headers.accept) ? pair.json : pair.html).respond(request)
  )

export const DocumentRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  const baseUrl = config.publicBaseUrl
  const spec = openApiDocument(baseUrl)
  const openapi = yield* makeDocument(JSON.stringify(spec), { contentType: json, cacheControl: documentCache })
  const docs = yield* makeDocument(docsPage({ script: documentPaths.docsScript, start: documentPaths.docsStart }, spec.info?.description ?? ""), {
    contentType: html,
    cacheControl: documentCache,
    headers: { "content-security-policy": docsContentSecurityPolicy }
  })
  const start = yield* makeDocument(docsStartScript, { contentType: "text/javascript; charset=utf-8", cacheControl: documentCache })
  // Encoded on its first request, once (about a second of zlib work off the event loop).
  const script = yield* Effect.cached(Effect.flatMap(loadScalarScript, (source) =>
    makeDocument(source, { contentType: "text/javascript; charset=utf-8", cacheControl: "public, max-age=86400" })))
  const problems = [...problemCodes.map((code): ProblemInfo => ProblemCatalogue[code]), ...oauthProblems]
  const pages = new Map<string, { readonly html: Document; readonly json: Document }>()
  for (const p of problems) pages.set(p.code, yield* negotiated(problemPage(p, baseUrl), catalogueEntry(p, baseUrl)))
  const index = yield* negotiated(problemIndex(problems), { problems: problems.map((p) => catalogueEntry(p, baseUrl)) })

  return Layer.mergeAll(
    HttpRouter.add("GET", documentPaths.openapi, respondWith(openapi)),
    HttpRouter.add("GET", documentPaths.docs, respondWith(docs)),
    HttpRouter.add("GET", documentPaths.docsSlash, HttpServerResponse.redirect(documentPaths.docs, { status: 308 })),
    HttpRouter.add("GET", documentPaths.root, HttpServerResponse.redirect(documentPaths.docs, { status: 302 })),
    HttpRouter.add("GET", documentPaths.docsStart, respondWith(start)),
    HttpRouter.add("GET", documentPaths.docsScript, Effect.flatMap(script, respondWith)),
    // Browsers ask for it on every page: nothing to show, and no 404 in their console.
    HttpRouter.add("GET", documentPaths.favicon, HttpServerResponse.empty({ status: 204, headers: { "cache-control": "public, max-age=86400" } })),
    HttpRouter.add("GET", documentPaths.problems, respondNegotiated(index)),
    HttpRouter.add(
      "GET",
      documentPaths.problem,
      Effect.flatMap(HttpRouter.params, (params) => {
        const page = params.code === undefined ? undefined : pages.get(params.code)
        // NotFound renders itself as a problem; the edge completes it like any other.
        return page === undefined
          ? Effect.fail(new NotFound({ detail: "There is no problem type with this code." }))
          : respondNegotiated(page)
      })
    ),
    ProbeRoutes
  )
}))
