/**
 * Requests whose answers must keep every byte when the edge answers them itself (issue 17): unknown
 * paths, refused methods, malformed and invalid bodies, and their neighbours that still go through
 * the HttpApi. Each is sent raw over a socket and its whole answer is kept raw (status line, headers
 * in order, body), with only the values that change from run to run masked.
 *
 * test/unit/http/fixtures/edge-bytes.json holds the answers as the HttpApi gave them before the edge
 * answered these requests (the GET queries': captured with the edge's query decoding turned off); `node test/unit/http/edge-bytes.ts <file>` writes the current answers to a file.
 */
import { writeFileSync } from "node:fs"
import { connect } from "node:net"

export interface RawCase {
  readonly name: string
  readonly method: string
  readonly target: string
  readonly headers?: Readonly<Record<string, string>>
  /** Sent with Content-Length, or chunked (in two chunks) with `chunked`. */
  readonly body?: string | Buffer
  readonly chunked?: boolean
}

export const requestId = "0b9f7d1e-4c7a-4e43-9a51-2f0e8c6d5b3a"

const json = { "content-type": "application/json" }
const rates = "/api/v1/exchange-rates"
const subscribe = "/api/subscribe"
const ratesGet = "/api/v1/rates"

export const rawCases: ReadonlyArray<RawCase> = [
  // 404: unknown paths, whatever the method, query or headers.
  { name: "404 GET", method: "GET", target: "/api/v1/unknown" },
  { name: "404 GET with a query", method: "GET", target: "/api/v1/unknown?x=1&y=%22" },
  { name: "404 GET escaped characters", method: "GET", target: "/a%22b/%5C/%F0%9F%98%80/'<x>" },
  { name: "404 GET quote and backslash", method: "GET", target: "/a\"b\\c" },
  { name: "404 HEAD", method: "HEAD", target: "/nope" },
  { name: "404 OPTIONS preflight", method: "OPTIONS", target: "/nope", headers: { origin: "https://app.example", "access-control-request-method": "POST" } },
  { name: "404 POST with a body", method: "POST", target: "/nope", headers: json, body: "{\"a\":1}" },
  { name: "404 POST chunked", method: "POST", target: "/nope", headers: json, body: "{\"a\":1}", chunked: true },
  { name: "404 DELETE", method: "DELETE", target: "/api/v2/exchange-rates" },
  { name: "404 with an Origin", method: "GET", target: "/unknown", headers: { origin: "https://app.example" } },
  { name: "404 case", method: "GET", target: "/API/HEALTH" },
  { name: "404 trailing slash", method: "GET", target: "/api/health/" },
  { name: "404 double slash", method: "GET", target: "//api/health" },
  { name: "404 under a document", method: "GET", target: "/openapi.json/x" },
  { name: "404 long path", method: "GET", target: "/" + "x".repeat(300) },
  { name: "404 long problem code", method: "GET", target: "/problems/" + "x".repeat(600) },
  { name: "404 unknown problem code", method: "GET", target: "/problems/no_such_code" },
  { name: "404 bad percent-encoding", method: "GET", target: "/problems/%zz" },
  { name: "404 with a Bearer token", method: "GET", target: "/nope", headers: { authorization: "Bearer abc" } },
  // 405 at the edge (and the token endpoint's OAuth form).
  { name: "405 DELETE health", method: "DELETE", target: "/api/health" },
  { name: "405 PUT rates", method: "PUT", target: rates, headers: json, body: "{}" },
  { name: "405 GET subscribe", method: "GET", target: subscribe },
  { name: "405 PATCH token", method: "PATCH", target: "/oauth/token" },
  { name: "405 POST document", method: "POST", target: "/openapi.json" },
  { name: "405 custom method", method: "PROPFIND", target: "/api/health" },
  // 400 malformed_json.
  { name: "malformed rates", method: "POST", target: rates, headers: json, body: "{\"cryptos\":[\"BTC\"," },
  { name: "malformed subscribe", method: "POST", target: subscribe, headers: json, body: "nope" },
  { name: "BOM stripped as the HttpApi does", method: "POST", target: rates, headers: json, body: "\uFEFF{\"cryptos\":[]}" },
  { name: "malformed charset", method: "POST", target: rates, headers: { "content-type": "application/json; charset=UTF-8" }, body: "{" },
  { name: "malformed chunked", method: "POST", target: rates, headers: json, body: "{\"cryptos\":[\"BTC\"", chunked: true },
  { name: "malformed with an Origin", method: "POST", target: rates, headers: { ...json, origin: "https://app.example" }, body: "[" },
  // 400 validation_failed.
  { name: "invalid empty list", method: "POST", target: rates, headers: json, body: "{\"cryptos\":[]}" },
  { name: "invalid members", method: "POST", target: rates, headers: json, body: "{\"cryptos\":[\"BTC\",\"B TC\",\"\"],\"days\":\"7\"}" },
  { name: "invalid null", method: "POST", target: rates, headers: json, body: "null" },
  { name: "invalid array", method: "POST", target: rates, headers: json, body: "[]" },
  { name: "invalid number", method: "POST", target: rates, headers: json, body: "1" },
  { name: "invalid string", method: "POST", target: rates, headers: json, body: "\"BTC\"" },
  { name: "invalid empty body", method: "POST", target: rates, headers: { ...json, "content-length": "0" } },
  { name: "invalid days and currency", method: "POST", target: rates, headers: json, body: "{\"cryptos\":[\"BTC\"],\"days\":0,\"currency\":\"us dollars\"}" },
  { name: "invalid too many symbols", method: "POST", target: rates, headers: json, body: JSON.stringify({ cryptos: Array.from({ length: 60 }, (_, i) => `S${i}`) }) },
  { name: "invalid long symbol", method: "POST", target: rates, headers: json, body: JSON.stringify({ cryptos: ["X".repeat(500)] }) },
  { name: "invalid many members", method: "POST", target: rates, headers: json, body: JSON.stringify({ cryptos: Array.from({ length: 25 }, (_, i) => `bad ${i}`) }) },
  { name: "invalid UTF-8", method: "POST", target: rates, headers: json, body: Buffer.concat([Buffer.from("{\"cryptos\":[\""), Buffer.from([0xff, 0xfe]), Buffer.from("\"]}")]) },
  { name: "invalid __proto__", method: "POST", target: rates, headers: json, body: "{\"__proto__\":{\"cryptos\":[\"BTC\"]}}" },
  { name: "invalid chunked", method: "POST", target: rates, headers: json, body: "{\"cryptos\":[]}", chunked: true },
  { name: "invalid subscribe empty", method: "POST", target: subscribe, headers: json, body: "{}" },
  { name: "invalid subscribe excess", method: "POST", target: subscribe, headers: json, body: "{\"locale\":\"de\",\"extra\":1,\"a/b~c\":2}" },
  { name: "invalid subscribe email", method: "POST", target: subscribe, headers: json, body: "{\"email\":\"x\",\"locale\":\"en\"}" },
  { name: "invalid subscribe types", method: "POST", target: subscribe, headers: json, body: "{\"email\":1,\"locale\":[]}" },
  // Other refusals of the edge.
  { name: "413 rates", method: "POST", target: rates, headers: json, body: "x".repeat(17 * 1024) },
  { name: "413 token", method: "POST", target: "/oauth/token", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "x".repeat(17 * 1024) },
  { name: "415 content coding", method: "POST", target: rates, headers: { ...json, "content-encoding": "gzip" }, body: "{}" },
  // Neighbours the edge hands on: other media types, a Bearer token (401 before 400), successes.
  { name: "415 text/plain", method: "POST", target: rates, headers: { "content-type": "text/plain" }, body: "{}" },
  { name: "no content type read as JSON", method: "POST", target: rates, body: "{\"cryptos\":[]}" },
  { name: "401 before 400", method: "POST", target: rates, headers: { ...json, authorization: "Bearer not-a-token" }, body: "{" },
  { name: "401 before validation", method: "POST", target: subscribe, headers: { ...json, authorization: "Bearer not-a-token" }, body: "{}" },
  { name: "subscribe accepted", method: "POST", target: subscribe, headers: json, body: "{\"email\":\"edge.bytes@example.com\",\"locale\":\"en\"}" },
  { name: "rates unknown symbols", method: "POST", target: rates, headers: json, body: "{\"cryptos\":[\"NOPECOIN\"],\"days\":2}" },
  // A GET's query decoded at the edge (400 validation_failed), and its neighbours the HttpApi answers.
  { name: "query missing", method: "GET", target: ratesGet },
  { name: "query invalid members", method: "GET", target: `${ratesGet}?cryptos=BTC,B%20TC,&days=0&currency=u&x=1` },
  { name: "query empty list", method: "GET", target: `${ratesGet}?cryptos=&days=7` },
  { name: "query too many symbols", method: "GET", target: `${ratesGet}?cryptos=${Array.from({ length: 51 }, (_, i) => `S${i}`).join(",")}` },
  { name: "query long symbol", method: "GET", target: `${ratesGet}?cryptos=${"X".repeat(40)}` },
  { name: "query repeated parameter", method: "GET", target: `${ratesGet}?cryptos=BTC&cryptos=ETH` },
  { name: "query days not an integer", method: "GET", target: `${ratesGet}?cryptos=BTC&days=1.5&days=x` },
  { name: "query bad percent-encoding", method: "GET", target: `${ratesGet}?cryptos=%zz` },
  { name: "query plus and escapes", method: "GET", target: `${ratesGet}?cryptos=B+TC,%E2%82%AC&currency=%22` },
  { name: "query after a semicolon", method: "GET", target: `${ratesGet};cryptos=B%20TC` },
  { name: "query HEAD", method: "HEAD", target: `${ratesGet}?days=x` },
  { name: "query with an Origin", method: "GET", target: `${ratesGet}?cryptos=`, headers: { origin: "https://app.example" } },
  { name: "query with a body", method: "GET", target: `${ratesGet}?cryptos=`, headers: json, body: "{}" },
  { name: "query 401 before 400", method: "GET", target: `${ratesGet}?cryptos=`, headers: { authorization: "Bearer not-a-token" } },
  { name: "query unknown symbols", method: "GET", target: `${ratesGet}?cryptos=NOPECOIN&days=2` },
  { name: "query answered", method: "GET", target: `${ratesGet}?cryptos=btc,BTC,eth&days=2&currency=EUR` }
]

/** Values that differ from one run to the next: the date, the remaining count, a rates answer's timestamps. */
const masked = new Set(["date", "ratelimit"])

/** One request on its own connection (Connection: close), the whole answer as raw text with masks. */
export const exchange = (url: string, c: RawCase): Promise<string> => {
  const { port, hostname } = new URL(url)
  const body = c.body === undefined ? undefined : Buffer.from(c.body)
  const head = [`${c.method} ${c.target} HTTP/1.1`, `host: ${hostname}:${port}`, "connection: close", `x-request-id: ${requestId}`]
  for (const [name, value] of Object.entries(c.headers ?? {})) head.push(`${name}: ${value}`)
  if (body !== undefined) head.push(c.chunked === true ? "transfer-encoding: chunked" : `content-length: ${body.length}`)
  const parts: Array<Buffer> = [Buffer.from(head.join("\r\n") + "\r\n\r\n", "latin1")]
  if (body !== undefined && c.chunked === true) {
    const half = Math.floor(body.length / 2)
    for (const piece of [body.subarray(0, half), body.subarray(half)]) {
      parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n"))
    }
    parts.push(Buffer.from("0\r\n\r\n"))
  } else if (body !== undefined) parts.push(body)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    const received: Array<Buffer> = []
    socket.on("data", (chunk) => received.push(chunk))
    socket.on("error", reject)
    socket.on("end", () => {
      const text = Buffer.concat(received).toString("latin1")
      const split = text.indexOf("\r\n\r\n")
      const lines = text.slice(0, split).split("\r\n").map((line) => {
        const colon = line.indexOf(":")
        return colon > 0 && masked.has(line.slice(0, colon).toLowerCase()) ? `${line.slice(0, colon)}: *` : line
      })
      resolve(`${lines.join("\r\n")}\r\n\r\n${text.slice(split + 4)}`)
    })
    socket.write(Buffer.concat(parts))
  })
}

/** Every case's answer by name, one request at a time. */
const answersOf = async (url: string) => {
  const answers: Record<string, string> = {}
  for (const c of rawCases) answers[c.name] = await exchange(url, c)
  return answers
}

if (import.meta.main) {
  const { startTestApp } = await import("../../support/app.ts")
  const app = await startTestApp()
  try {
    writeFileSync(process.argv[2] ?? "edge-bytes.json", JSON.stringify(await answersOf(app.url), null, 2) + "\n")
  } finally {
    await app.close()
  }
}
