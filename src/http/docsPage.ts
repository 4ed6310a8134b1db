/**
 * The interactive reference (`/docs`): Scalar's standalone script as bundled with `effect` (no CDN),
 * loaded by a small page and a small start script, all three from this service, so that the page
 * works offline, the 3 MB script is cached by browsers (and compiled once, V8's code cache), and the
 * Content-Security-Policy needs no inline script. Scalar reads the same `/openapi.json` as everyone.
 */
import { Effect } from "effect"

/**
 * Scalar's options (keys checked against the bundled @scalar/api-reference 1.43 script): nothing that
 * needs the internet or a Scalar account.
 */
const scalarConfiguration = {
  url: "/openapi.json",
  slug: "api",
  title: "Crypto landing API",
  // fonts.scalar.com: the system fonts do.
  withDefaultFonts: false,
  // The toolbar's "Share" (registry.scalar.com) and "Generate SDKs"; shown on localhost by default.
  showDeveloperTools: "never",
  // "Open API Client" hands the document to client.scalar.com.
  hideClientButton: true,
  telemetry: false,
  documentDownloadType: "json",
  defaultOpenAllTags: true,
  showOperationId: true
} as const

/** The page's policy: its own scripts only; Scalar injects its styles, and its client calls this origin. */
export const docsContentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'"
].join("; ")

/**
 * Scalar renders once with its default options before reading ours, and that first render asks
 * fonts.scalar.com for Inter and JetBrains Mono whatever `withDefaultFonts` says: with the system
 * fonts in its variables on every element, no text uses them and the browser never fetches them.
 */
const systemFonts = ":root,:root *{" +
  "--scalar-font:system-ui,-apple-system,\"Segoe UI\",Roboto,Ubuntu,Cantarell,sans-serif!important;" +
  "--scalar-font-code:ui-monospace,Menlo,Monaco,\"Cascadia Mono\",\"Roboto Mono\",\"Courier New\",monospace!important}"

export const docsPage = (paths: { readonly script: string; readonly start: string }, description: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Crypto landing API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="description" content="${description.replaceAll("&", "&amp;").replaceAll("\"", "&quot;").replaceAll("<", "&lt;")}">
<style>${systemFonts}</style>
</head>
<body>
<div id="api-reference"></div>
<script src="${paths.script}"></script>
<script src="${paths.start}"></script>
</body>
</html>
`

export const docsStartScript = `Scalar.createApiReference(document.getElementById("api-reference"), ${JSON.stringify(scalarConfiguration)})\n`

/**
 * Scalar's standalone script as `effect` bundles it for HttpApiScalar (3.2 MB). Loaded on demand: an
 * instance that never serves /docs does not carry it. Its module is internal to `effect` (pinned),
 * hence the file URL beside the package's entry point.
 */
export const loadScalarScript: Effect.Effect<string> = Effect.promise(async () => {
  const module = await import(new URL("./http-api/internal/httpApiScalar.js", import.meta.resolve("effect")).href)
  return module.javascript as string
})
