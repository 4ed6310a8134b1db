/**
 * A landing page of another origin embedding the widget (C10, docs/widget.md): served from its own port,
 * under the Content-Security-Policy such a page would have, allowing scripts and connections to the API's
 * origin only (no inline script, no eval, styles from itself only, Trusted Types required), so that what
 * the widget needs beyond that shows up as a violation. `npm run demo` serves it; the browser test loads it.
 *
 * Programmatic: `await startWidgetPage({ api: "http://127.0.0.1:3000" })`.
 * Standalone:   `node test/emulators/widgetPage.ts --api http://127.0.0.1:3000 [--port 3001]`
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"

export interface WidgetOnPage {
  readonly symbols: string
  readonly currency?: string
  readonly days?: number
  /** A class of the page's style sheet: `dark` sets the widget's custom properties. */
  readonly className?: string
}

export interface WidgetPageOptions {
  /** The API's base URL, where /widget.js is served. */
  readonly api: string
  readonly host?: string
  /** 0 (default): any free port. */
  readonly port?: number
  readonly widgets?: ReadonlyArray<WidgetOnPage>
}

export interface WidgetPage {
  readonly url: string
  /** The policy every page response carries. */
  readonly contentSecurityPolicy: string
  readonly close: () => Promise<void>
}

export const defaultWidgets: ReadonlyArray<WidgetOnPage> = [
  { symbols: "BTC,ETH,SOL", currency: "usd", days: 30 },
  { symbols: "BTC,ETH", currency: "eur", days: 7, className: "dark" }
]

/** The page's own style sheet: its layout, and a theme through the widget's custom properties. */
const pageCss = `body { font-family: system-ui, sans-serif; max-width: 44rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }
code { font-size: 0.85em; word-break: break-all; }
crypto-prices { margin: 1rem 0; }
crypto-prices.dark {
  --crypto-prices-background: #0f172a;
  --crypto-prices-color: #e2e8f0;
  --crypto-prices-muted: #94a3b8;
  --crypto-prices-border: 1px solid #334155;
  --crypto-prices-up: #4ade80;
  --crypto-prices-down: #f87171;
  --crypto-prices-sparkline: rgb(56, 189, 248);
  --crypto-prices-radius: 0.75rem;
}
`

const escapeHtml = (s: string) => s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll("\"", "&quot;")

export const startWidgetPage = async (options: WidgetPageOptions): Promise<WidgetPage> => {
  const api = options.api.replace(/\/$/, "")
  const apiOrigin = new URL(api).origin
  const contentSecurityPolicy = [
    "default-src 'none'",
    `script-src ${apiOrigin}`,
    `connect-src ${apiOrigin}`,
    "style-src 'self'",
    "require-trusted-types-for 'script'",
    "base-uri 'none'",
    "form-action 'none'"
  ].join("; ")
  const widgets = options.widgets ?? defaultWidgets
  const page = (origin: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Crypto prices, embedded</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/page.css">
<script type="module" src="${escapeHtml(api)}/widget.js"></script>
</head><body>
<h1>A page of another origin</h1>
<p>This page comes from <code>${escapeHtml(origin)}</code>; the widget from <code>${escapeHtml(api)}/widget.js</code>,
under <code>Content-Security-Policy: ${escapeHtml(contentSecurityPolicy)}</code>.</p>
${widgets.map((w) => `<crypto-prices${w.className === undefined ? "" : ` class="${escapeHtml(w.className)}"`} symbols="${escapeHtml(w.symbols)}"${
    w.currency === undefined ? "" : ` currency="${escapeHtml(w.currency)}"`}${w.days === undefined ? "" : ` days="${w.days}"`}></crypto-prices>`).join("\n")}
</body></html>
`
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]
    const headers = { "content-security-policy": contentSecurityPolicy, "cache-control": "no-store", "x-content-type-options": "nosniff" }
    if (path === "/") {
      const body = page(`http://${req.headers.host ?? "localhost"}`)
      res.writeHead(200, { ...headers, "content-type": "text/html; charset=utf-8", "content-length": Buffer.byteLength(body) })
      return res.end(req.method === "HEAD" ? undefined : body)
    }
    if (path === "/page.css") {
      res.writeHead(200, { ...headers, "content-type": "text/css; charset=utf-8", "content-length": Buffer.byteLength(pageCss) })
      return res.end(req.method === "HEAD" ? undefined : pageCss)
    }
    res.writeHead(404, { ...headers, "content-type": "text/plain; charset=utf-8" })
    res.end("not found\n")
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve())
  })
  const { address, port } = server.address() as AddressInfo
  return {
    url: `http://${address.includes(":") ? `[${address}]` : address}:${port}`,
    contentSecurityPolicy,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

if (import.meta.main) {
  const args = process.argv.slice(2)
  const option = (name: string) => {
    const i = args.indexOf(name)
    return i < 0 ? undefined : args[i + 1]
  }
  const started = await startWidgetPage({ api: option("--api") ?? "http://127.0.0.1:3000", port: Number(option("--port") ?? "3001") })
  console.log(`widget page at ${started.url}/ (Ctrl-C stops it)`)
}
