/**
 * Shared set-up of the HTTP surface fuzz tests (http-surface-*.test.ts): everything around the bodies, fuzzed through
 * the real HTTP app: random methods, path variants (trailing slashes, percent-encoding, case, double slashes, dot
 * segments), odd and oversized headers, and Authorization variants on the public operations. Each answer must satisfy
 * the invariants (support/invariants.ts), and the outcome follows from the route table and RFC 6750.
 *
 * Node's own refusals, documented here because no application code runs for them:
 * - headers over 16 KiB in total (Node's default `maxHeaderSize`) → 431 with no body and no problem;
 * - an unknown method token, a malformed header line or Content-Length, a missing Host, bare-LF line
 *   endings, Content-Length with Transfer-Encoding → 400 with no body (llhttp rejects the request
 *   before it is parsed); two Host fields are accepted (RFC 9112 §3.2 would want 400);
 * - CONNECT → the connection is closed (the server has no 'connect' listener).
 */
import { afterAll, beforeAll } from "vitest"
import { tokenFor } from "../../support/app.ts"
import { type FuzzTarget, startFuzzTarget } from "../../support/fuzz/harness.ts"

/** The file's fuzz target and its tokens, started by `useSurfaceTarget`'s beforeAll. */
export let target: FuzzTarget
export let allScopesToken = ""
export let healthOnlyToken = ""

/** Starts the file's fuzz target (and takes a token of every scope and a health-only one), closed after its tests. */
export const useSurfaceTarget = () => {
  beforeAll(async () => {
    target = await startFuzzTarget()
    allScopesToken = await tokenFor(target.app, "svc-all", "secret-all")
    healthOnlyToken = await tokenFor(target.app, "svc-health", "secret-health")
  })
  afterAll(() => target.close())
}


/**
 * The query a GET needs to be answered 200 (GET /api/v1/rates and the price stream: their `cryptos`), if any. The
 * stream's 200 never ends: the fuzz clients take its head as the answer (support/fuzz/http.ts).
 */
const happyQuery = (path: string): string | undefined => (path === "/api/v1/rates" || path === "/api/v1/prices/stream" ? "cryptos=BTC" : undefined)

/**
 * `target` with the happy query of `path` added: after the target's own query (the router's: from the first `?` or
 * `;`), or as the query.
 */
export const withHappyQuery = (target: string, path: string) => {
  const query = happyQuery(path)
  if (query === undefined) return target
  return /[?;]/.test(target) ? `${target}&${query}` : `${target}?${query}`
}

/** Every path the service serves, one concrete URL each, with its methods. */
export const knownPaths = (): Array<{ path: string; methods: ReadonlyArray<string> }> => {
  const fromDocument = Object.keys(target.model.doc.paths).map((path) => ({
    path,
    methods: target.model.methodsOf(path).flatMap((m) => (m === "GET" ? ["GET", "HEAD"] : [m]))
  }))
  return [
    ...fromDocument,
    { path: "/openapi.json", methods: ["GET", "HEAD"] },
    { path: "/docs", methods: ["GET", "HEAD"] },
    { path: "/problems/not_found", methods: ["GET", "HEAD"] },
    { path: "/problems", methods: ["GET", "HEAD"] },
    { path: "/livez", methods: ["GET", "HEAD"] },
    { path: "/readyz", methods: ["GET", "HEAD"] }
  ]
}

export const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND", "LINK", "PURGE", "QUERY", "SEARCH", "LOCK"]
