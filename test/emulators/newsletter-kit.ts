/**
 * Shared machinery for the newsletter provider emulators (brevo.ts, listmonk.ts): a real node:http server on
 * 127.0.0.1 that records exactly what it receives and can be switched into failure modes, both from
 * code and over HTTP (`POST /__control`, `GET /__received`); each provider may add its own control commands.
 *
 * Runs under Node 24's type stripping: erasable TypeScript only, `.ts` extensions on local imports.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo, Socket } from "node:net"

export const FaultModes = ["none", "500", "503", "429", "401", "403", "hang", "reset", "html", "garbage", "slow"] as const
/**
 * - "500" / "503" / "429" / "401" / "403": that status with the provider's body and headers
 * - "hang": read the request, never answer          - "reset": read the request, reset the connection
 * - "html": 200 with an HTML page (a proxy or portal) - "garbage": success status, truncated JSON
 * - "slow": answer normally after `delayMs` (default 3000)
 */
export type FaultMode = (typeof FaultModes)[number]

export interface Fault {
  readonly mode: FaultMode
  /** Apply to this many requests, then go back to normal; unlimited when absent. */
  readonly times?: number
  /** For "slow". */
  readonly delayMs?: number
}

export interface ReceivedRequest {
  readonly method: string
  /** Path and query as sent. */
  readonly path: string
  /** Lower-case names, as node:http gives them. */
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  /** The peer's address, e.g. 127.0.0.1 (what a provider's IP allowlist judges). */
  readonly remoteAddress: string
  /** The JSON body parsed, or `undefined` when it was absent or not JSON (see `rawBody`). */
  readonly body: unknown
  readonly rawBody: string
  /** ISO 8601 time of arrival. */
  readonly at: string
}

export interface Reply {
  readonly status: number
  readonly headers?: Readonly<Record<string, string>>
  /** A string is sent as is; anything else as JSON. Absent: no body. */
  readonly body?: unknown
}

/** What makes an emulator a particular provider. */
export interface ProviderBehaviour {
  readonly name: string
  /** Prefix of the provider's API in the emulator's `url` (e.g. "/v3" for Brevo). */
  readonly basePath: string
  /** The documented behaviour for a request that no fault intercepts. */
  readonly handle: (request: ReceivedRequest) => Reply
  /** The provider's answer for a status-type fault. */
  readonly failure: (mode: "500" | "503" | "429" | "401" | "403" | "html" | "garbage") => Reply
  /** Forget every contact or subscriber. */
  readonly resetState: () => void
  /** The provider's own `POST /__control` commands (beside reset, clear and fault); throws on a bad one. */
  readonly control?: (command: Record<string, unknown>) => void
}

export interface Emulator {
  /** Base URL to configure the client with (origin plus the provider's base path). */
  readonly url: string
  readonly origin: string
  readonly port: number
  /** Everything received so far, control requests excepted, oldest first. */
  readonly received: () => ReadonlyArray<ReceivedRequest>
  /** Forgets received requests (contacts are kept, so re-subscription can be tested). */
  readonly clear: () => void
  /** Forgets received requests, contacts and any fault. */
  readonly reset: () => void
  readonly setFault: (fault: FaultMode | Fault) => void
  readonly close: () => Promise<void>
}

export interface StartOptions {
  /** 0 (the default) picks a free port. */
  readonly port?: number
  readonly host?: string
}

const MAX_BODY_BYTES = 1024 * 1024

export const startEmulator = async (behaviour: ProviderBehaviour, options: StartOptions = {}): Promise<Emulator> => {
  const received: Array<ReceivedRequest> = []
  let fault: { mode: FaultMode; remaining: number; delayMs: number } = { mode: "none", remaining: Infinity, delayMs: 0 }
  const sockets = new Set<Socket>()
  const timers = new Set<NodeJS.Timeout>()

  const setFault = (input: FaultMode | Fault): void => {
    const f: Fault = typeof input === "string" ? { mode: input } : input
    if (!(FaultModes as ReadonlyArray<string>).includes(f.mode)) throw new Error(`unknown fault mode "${f.mode}"`)
    fault = { mode: f.mode, remaining: f.times ?? Infinity, delayMs: f.delayMs ?? 3000 }
  }
  /** The fault for this request, counting it against `times`. */
  const takeFault = (): { mode: FaultMode; delayMs: number } => {
    const current = { mode: fault.mode, delayMs: fault.delayMs }
    if (fault.mode !== "none" && --fault.remaining <= 0) fault = { mode: "none", remaining: Infinity, delayMs: 0 }
    return current
  }
  const reset = (): void => {
    received.length = 0
    behaviour.resetState()
    fault = { mode: "none", remaining: Infinity, delayMs: 0 }
  }

  const server = createServer((req, res) => {
    readBody(req).then(
      (raw) => onRequest(req, res, raw),
      () => send(res, { status: 413, body: { message: "body too large" } })
    )
  })
  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })

  const onRequest = (req: IncomingMessage, res: ServerResponse, rawBody: string): void => {
    const path = req.url ?? "/"
    const pathname = path.split("?")[0]
    if (pathname === "/__received" && req.method === "GET") return send(res, { status: 200, body: received })
    if (pathname === "/__control" && req.method === "POST") return control(res, parseJson(rawBody))

    const request: ReceivedRequest = {
      method: req.method ?? "GET",
      path,
      headers: { ...req.headers },
      remoteAddress: req.socket.remoteAddress ?? "",
      body: parseJson(rawBody),
      rawBody,
      at: new Date().toISOString()
    }
    received.push(request)
    const { mode, delayMs } = takeFault()
    switch (mode) {
      case "none":
        return send(res, behaviour.handle(request))
      case "hang":
        return // the socket stays open until the client gives up or the emulator closes
      case "reset":
        req.socket.resetAndDestroy()
        return
      case "slow": {
        const timer = setTimeout(() => {
          timers.delete(timer)
          send(res, behaviour.handle(request))
        }, delayMs)
        timers.add(timer)
        return
      }
      default:
        return send(res, behaviour.failure(mode))
    }
  }

  const control = (res: ServerResponse, body: unknown): void => {
    const command = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>
    try {
      if (command.reset === true) reset()
      if (command.clear === true) received.length = 0
      if (command.fault !== undefined) setFault(command.fault as FaultMode | Fault)
      behaviour.control?.(command)
      send(res, { status: 204 })
    } catch (error) {
      send(res, { status: 400, body: { message: error instanceof Error ? error.message : String(error) } })
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve())
  })
  const address = server.address() as AddressInfo
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address
  const origin = `http://${host}:${address.port}`

  return {
    url: `${origin}${behaviour.basePath}`,
    origin,
    port: address.port,
    received: () => [...received],
    clear: () => {
      received.length = 0
    },
    reset,
    setFault,
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer)
        server.close(() => resolve())
        // Hanging and keep-alive connections would otherwise keep `close` waiting.
        for (const socket of sockets) socket.destroy()
      })
  }
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        reject(new Error("too large"))
        req.destroy()
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

const send = (res: ServerResponse, reply: Reply): void => {
  if (res.headersSent || res.destroyed) return
  const headers: Record<string, string> = { ...reply.headers }
  let payload: string | undefined
  if (typeof reply.body === "string") payload = reply.body
  else if (reply.body !== undefined) {
    payload = JSON.stringify(reply.body)
    headers["content-type"] ??= "application/json; charset=utf-8"
  }
  res.writeHead(reply.status, headers)
  res.end(payload)
}

export const parseJson = (text: string): unknown => {
  if (text.trim() === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** `--name value` pairs from argv. */
export const cliOptions = (argv: ReadonlyArray<string>): Map<string, string> => {
  const out = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? ""
    if (!arg.startsWith("--")) continue
    const eq = arg.indexOf("=")
    if (eq > 0) out.set(arg.slice(2, eq), arg.slice(eq + 1))
    else out.set(arg.slice(2), argv[i + 1] !== undefined && !argv[i + 1]!.startsWith("--") ? argv[++i]! : "true")
  }
  return out
}

/** Runs an emulator until SIGINT/SIGTERM, announcing its URL as one JSON line on stdout. */
export const runStandalone = async (name: string, start: () => Promise<Emulator>): Promise<void> => {
  const emulator = await start()
  process.stdout.write(`${JSON.stringify({ emulator: name, url: emulator.url, control: `${emulator.origin}/__control` })}\n`)
  const stop = () => {
    void emulator.close().then(() => process.exit(0))
  }
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
}

/** What a captive portal or login proxy in between answers: 200, HTML, and no provider behind it. */
export const captivePortalAnswer = {
  status: 200,
  headers: { "content-type": "text/html; charset=utf-8" },
  body: "<!doctype html><html><head><title>Sign in</title></head><body>Network login required</body></html>"
}
