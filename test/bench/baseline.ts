/**
 * The benchmark's baseline: a raw `node:http` server that answers the benchmark's requests with the
 * bytes the real service answered (captured by test/bench/bench.ts), so that `service / baseline` shows
 * what the framework, middleware and handlers cost on top of Node's HTTP stack.
 *
 *   PORT=N node test/bench/baseline.ts <fixtures.json>      prints "listening <port>" when ready
 *
 * Per request it does the minimum the service cannot avoid either: reads the whole body, picks the
 * fixture by method, path and exact body bytes, and writes the captured status, headers and body
 * with a fresh `X-Request-Id` (same length as the service's). `GET /api/health` is rendered fresh
 * (`timestamp`, `uptime` change per call) with the same member order. Listens on 127.0.0.1 only.
 *
 * Runs on Node 24's type stripping: erasable TypeScript only.
 */
import { randomUUID } from "node:crypto"
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"

export interface BaselineFixture {
  readonly method: string
  readonly path: string
  /** Exact request body (UTF-8) this fixture answers; absent: any body. */
  readonly requestBody?: string
  readonly status: number
  /** Lower-case header names in the service's order, hop-by-hop and Date excluded. */
  readonly headers: ReadonlyArray<readonly [string, string]>
  /** Response body, base64. */
  readonly body: string
  /** "health": render a fresh health body of the same shape instead of replaying `body`. */
  readonly dynamic?: "health"
}

interface Prepared {
  readonly fixture: BaselineFixture
  readonly body: Buffer
  readonly environment: string
}

const file = process.argv[2]
if (file === undefined) {
  process.stderr.write("usage: node test/bench/baseline.ts <fixtures.json>\n")
  process.exit(2)
}
const fixtures = JSON.parse(readFileSync(file, "utf8")) as ReadonlyArray<BaselineFixture>

const prepared: Array<Prepared> = fixtures.map((fixture) => {
  const body = Buffer.from(fixture.body, "base64")
  let environment = "development"
  if (fixture.dynamic === "health") {
    const parsed = JSON.parse(body.toString("utf8")) as { environment?: unknown }
    if (typeof parsed.environment === "string") environment = parsed.environment
  }
  return { fixture, body, environment }
})

const startedAt = performance.now()

const pick = (method: string, path: string, body: string): Prepared | undefined => {
  let fallback: Prepared | undefined
  for (const p of prepared) {
    if (p.fixture.method !== method || p.fixture.path !== path) continue
    if (p.fixture.requestBody === undefined) fallback ??= p
    else if (p.fixture.requestBody === body) return p
  }
  return fallback
}

const notFound = Buffer.from("{\"error\":\"no fixture\"}")

const server = createServer((req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    const body = chunks.length === 0 ? "" : Buffer.concat(chunks).toString("utf8")
    const p = pick(req.method ?? "GET", req.url ?? "/", body)
    if (p === undefined) {
      res.writeHead(404, { "content-type": "application/json", "content-length": notFound.length })
      res.end(notFound)
      return
    }
    let payload = p.body
    if (p.fixture.dynamic === "health") {
      const now = Date.now()
      payload = Buffer.from(JSON.stringify({
        status: "healthy",
        timestamp: new Date(now).toISOString(),
        uptime: Math.round(performance.now() - startedAt) / 1000,
        environment: p.environment
      }))
    }
    // The service's header order; content-length and x-request-id are per response.
    const headers: Record<string, string | number> = {}
    for (const [name, value] of p.fixture.headers) {
      headers[name] = name === "content-length" ? payload.length : name === "x-request-id" ? randomUUID() : value
    }
    res.writeHead(p.fixture.status, headers)
    res.end(req.method === "HEAD" ? undefined : payload)
  })
})
server.keepAliveTimeout = 5_000

server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`)
})

const stop = () => {
  server.close(() => process.exit(0))
  server.closeAllConnections()
  setTimeout(() => process.exit(0), 2_000).unref()
}
process.once("SIGTERM", stop)
process.once("SIGINT", stop)
