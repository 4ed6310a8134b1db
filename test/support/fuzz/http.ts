/**
 * HTTP clients for fuzzing that do not normalise requests the way fetch does.
 *
 * - `send`: node:http with a fresh connection per request (no keep-alive, so one odd request can
 *   never poison the next), headers as raw name/value pairs (duplicates kept, order kept), any path
 *   Node's client accepts, optional chunked bodies.
 * - `sendBytes`: the request written byte for byte on a TCP socket, for what node:http refuses to
 *   send (invalid bytes in the path or header values, malformed request lines). The answer is parsed
 *   here (status line, headers, Content-Length / chunked / close-delimited body).
 */
import { type Agent, request as httpRequest } from "node:http"
import { connect } from "node:net"

export interface RawResponse {
  readonly status: number
  /** Lower-case names; repeated headers joined with ", " (as node:http does for most names). */
  readonly headers: Readonly<Record<string, string>>
  /** Every header line as received, lower-case names, for checks of repeated fields. */
  readonly headerLines: ReadonlyArray<readonly [string, string]>
  readonly body: Buffer
  readonly text: string
  readonly elapsedMs: number
}

export interface RawRequest {
  readonly method: string
  /** Sent as is (node:http still refuses control characters and spaces: use `sendBytes` for those). */
  readonly path: string
  /** Name/value pairs in order; the same name may appear several times. */
  readonly headers?: ReadonlyArray<readonly [string, string]>
  readonly body?: string | Buffer
  /** Send the body with Transfer-Encoding: chunked in pieces of this size instead of Content-Length. */
  readonly chunkSize?: number
  readonly timeoutMs?: number
  /** A keep-alive agent to reuse connections (the soak); by default a fresh connection per request. */
  readonly agent?: Agent
}

const collect = (
  status: number,
  rawHeaders: ReadonlyArray<string>,
  body: Buffer,
  started: number
): RawResponse => {
  const headerLines: Array<readonly [string, string]> = []
  const headers: Record<string, string> = {}
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase()
    const value = rawHeaders[i + 1]!
    headerLines.push([name, value])
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
  }
  return { status, headers, headerLines, body, text: body.toString("utf8"), elapsedMs: performance.now() - started }
}

/** One request on its own connection through node:http. */
export const send = (baseUrl: string, req: RawRequest): Promise<RawResponse> => {
  const url = new URL(baseUrl)
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const flat: Array<string> = []
    // With headers as an array node:http adds no Host of its own (and HTTP/1.1 requires one).
    const hasHost = (req.headers ?? []).some(([n]) => n.toLowerCase() === "host")
    if (!hasHost) flat.push("Host", url.host)
    for (const [name, value] of req.headers ?? []) flat.push(name, value)
    const chunked = req.chunkSize !== undefined && req.body !== undefined
    const body = req.body === undefined ? undefined : Buffer.isBuffer(req.body) ? req.body : Buffer.from(req.body, "utf8")
    const hasLength = (req.headers ?? []).some(([n]) => n.toLowerCase() === "content-length")
    if (body !== undefined && !chunked && !hasLength) flat.push("Content-Length", String(body.length))
    if (chunked) flat.push("Transfer-Encoding", "chunked")
    const client = httpRequest({
      host: url.hostname,
      port: url.port,
      method: req.method,
      path: req.path,
      agent: req.agent ?? false,
      // node:http accepts a flat [name, value, name, value, ...] array: duplicates survive.
      headers: flat as unknown as Record<string, string>,
      timeout: req.timeoutMs ?? 15_000
    }, (res) => {
      // An event stream (the price stream, C10) never ends: its head is the answer, and the connection is closed.
      if (isEventStream(res.headers["content-type"])) {
        resolve(collect(res.statusCode ?? 0, res.rawHeaders, Buffer.alloc(0), started))
        return void res.destroy()
      }
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve(collect(res.statusCode ?? 0, res.rawHeaders, Buffer.concat(chunks), started)))
      res.on("error", reject)
    })
    client.on("timeout", () => client.destroy(new Error(`no answer within ${req.timeoutMs ?? 15_000} ms`)))
    client.on("error", reject)
    if (body === undefined) return void client.end()
    if (!chunked) return void client.end(body)
    for (let i = 0; i < body.length; i += req.chunkSize!) client.write(body.subarray(i, i + req.chunkSize!))
    client.end()
  })
}

/**
 * Writes `bytes` (a whole request: request line, headers, blank line, body) on a new TCP connection
 * and parses the answer. Resolves with status 0 when the server closes without answering.
 */
export const sendBytes = (baseUrl: string, bytes: Buffer | string, timeoutMs = 15_000): Promise<RawResponse> => {
  const url = new URL(baseUrl)
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) })
    const chunks: Array<Buffer> = []
    let received = 0
    let expectedTotal: number | undefined // head + Content-Length, once the head is in
    let settled = false
    const isHead = Buffer.from(bytes).subarray(0, 5).toString("latin1") === "HEAD "
    const finish = () => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      try {
        resolve(parseResponse(Buffer.concat(chunks), started, isHead))
      } catch (error) {
        reject(error)
      }
    }
    const timer = setTimeout(() => {
      settled = true
      socket.destroy()
      reject(new Error(`no answer within ${timeoutMs} ms`))
    }, timeoutMs)
    socket.on("data", (c: Buffer) => {
      chunks.push(c)
      received += c.length
      // Large bodies (the /docs page) arrive in many chunks: re-parse only until the length is known.
      if (expectedTotal === undefined) {
        const data = Buffer.concat(chunks)
        if (isComplete(data, isHead)) return finish()
        const head = splitHead(data)
        const length = head === undefined ? undefined : header(head.raw, "content-length")
        if (head !== undefined && length !== undefined) expectedTotal = data.length - head.rest.length + Number(length)
        else if (head !== undefined && (header(head.raw, "transfer-encoding") ?? "").toLowerCase().includes("chunked")) expectedTotal = Infinity
      } else if (received >= expectedTotal) finish()
      else if (expectedTotal === Infinity && c.subarray(-5).toString("latin1") === "0\r\n\r\n") finish()
    })
    socket.on("end", finish)
    socket.on("close", finish)
    socket.on("error", (error: NodeJS.ErrnoException) => {
      // A reset after the answer was sent still leaves a readable answer.
      if (error.code === "ECONNRESET" || error.code === "EPIPE") finish()
      else if (!settled) {
        settled = true
        clearTimeout(timer)
        reject(error)
      }
    })
    socket.write(bytes)
  })
}

const HEADER_END = Buffer.from("\r\n\r\n")

const isEventStream = (contentType: string | undefined) => (contentType ?? "").toLowerCase().startsWith("text/event-stream")

const splitHead = (data: Buffer) => {
  const end = data.indexOf(HEADER_END)
  if (end < 0) return undefined
  const lines = data.subarray(0, end).toString("latin1").split("\r\n")
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? 0)
  const raw: Array<string> = []
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":")
    if (colon > 0) raw.push(line.slice(0, colon), line.slice(colon + 1).trim())
  }
  return { status, raw, rest: data.subarray(end + 4) }
}

const header = (raw: ReadonlyArray<string>, name: string) => {
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) return raw[i + 1]
  return undefined
}

/** Decodes a chunked body; undefined while incomplete. */
const dechunk = (data: Buffer): Buffer | undefined => {
  const parts: Array<Buffer> = []
  let offset = 0
  for (;;) {
    const lineEnd = data.indexOf("\r\n", offset)
    if (lineEnd < 0) return undefined
    const size = Number.parseInt(data.subarray(offset, lineEnd).toString("latin1"), 16)
    if (!Number.isFinite(size)) return Buffer.concat(parts)
    if (size === 0) return Buffer.concat(parts)
    if (data.length < lineEnd + 2 + size + 2) return undefined
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size))
    offset = lineEnd + 2 + size + 2
  }
}

const isComplete = (data: Buffer, isHead: boolean) => {
  const head = splitHead(data)
  if (head === undefined) return false
  if (isHead || head.status === 204 || head.status === 304) return true
  // An event stream never ends: complete with its head.
  if (isEventStream(header(head.raw, "content-type"))) return true
  const length = header(head.raw, "content-length")
  if (length !== undefined) return head.rest.length >= Number(length)
  if ((header(head.raw, "transfer-encoding") ?? "").toLowerCase().includes("chunked")) return dechunk(head.rest) !== undefined
  return false // close-delimited: wait for the end of the connection
}

const parseResponse = (data: Buffer, started: number, isHead: boolean): RawResponse => {
  const head = splitHead(data)
  if (head === undefined) return collect(0, [], data, started)
  if (isHead) return collect(head.status, head.raw, head.rest, started)
  // An event stream's body is not read (it never ends).
  if (isEventStream(header(head.raw, "content-type"))) return collect(head.status, head.raw, Buffer.alloc(0), started)
  const length = header(head.raw, "content-length")
  const chunked = (header(head.raw, "transfer-encoding") ?? "").toLowerCase().includes("chunked")
  const body = length !== undefined
    ? head.rest.subarray(0, Number(length))
    : chunked
    ? dechunk(head.rest) ?? head.rest
    : head.rest
  return collect(head.status, head.raw, body, started)
}
