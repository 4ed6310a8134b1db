/**
 * The emulators' WebSocket server side, on Node's `http` `upgrade` event: the protocol is the `ws` package's (handshake,
 * framing, masking, fragments, the closing handshake, 1002 for a protocol error, 1007 for text that is not UTF-8,
 * 1009 past `maxMessageBytes`; no compression offered). Here only what an emulator decides: which upgrades it refuses
 * and how (a plain HTTP answer with a JSON body), whether it answers a ping, and how long a closing peer may take.
 * Erasable TypeScript only: Node runs it directly. Nothing runs on import.
 */
import type { IncomingMessage } from "node:http"
import type { Duplex } from "node:stream"
import { WebSocket, WebSocketServer } from "ws"

/** How long a closing connection may take to answer our close frame before it is cut. */
const CLOSE_GRACE_MS = 1_000

export interface WebSocketPeer {
  /** Open: neither side has started closing. */
  readonly isOpen: () => boolean
  /** One text message; nothing once closing. */
  readonly send: (text: string) => void
  /** The closing handshake: our close frame, then the TCP connection ends (at the latest after a grace). */
  readonly close: (code: number, reason?: string) => void
  /** Cut the TCP connection, no close frame (the client sees 1006). */
  readonly destroy: () => void
}

export interface WebSocketHandlers {
  readonly onMessage: (text: string) => void
  /** Once, when the TCP connection is gone, whoever closed it. */
  readonly onClose: () => void
  /** Whether to answer a ping now (a silent server answers nothing). */
  readonly answerPings?: () => boolean
}

/** Refuse an upgrade with a plain HTTP answer, and end the connection. */
export const refuseUpgrade = (socket: Duplex, status: number, reason: string, body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body)
  const lines = [`HTTP/1.1 ${status} ${reason}`, "content-type: application/json; charset=utf-8", `content-length: ${Buffer.byteLength(text)}`, "connection: close"]
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
  socket.on("error", () => {})
  socket.end(`${lines.join("\r\n")}\r\n\r\n${text}`)
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref()
}

/**
 * Why the request cannot be upgraded ([status, reason]), or undefined when it can: checked before `ws` sees it, so that
 * the emulator counts the refusal and answers it as it answers every other (426 names the version it speaks).
 */
export const upgradeProblem = (req: IncomingMessage): readonly [number, string] | undefined => {
  if (req.method !== "GET") return [405, "Method Not Allowed"]
  if (!/\bwebsocket\b/i.test(req.headers.upgrade ?? "")) return [400, "Bad Request"]
  if (req.headers["sec-websocket-version"] !== "13") return [426, "Upgrade Required"]
  const key = req.headers["sec-websocket-key"]
  if (typeof key !== "string" || Buffer.from(key, "base64").length !== 16) return [400, "Bad Request"]
  return undefined
}

/** One server per message bound: `ws` takes the bound as an option of its server. */
const servers = new Map<number, WebSocketServer>()
const serverFor = (maxMessageBytes: number) => {
  let server = servers.get(maxMessageBytes)
  if (server === undefined) {
    // Pings are answered here (the handlers say when); no client list: the emulator keeps its own.
    server = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: maxMessageBytes, autoPong: false, clientTracking: false })
    servers.set(maxMessageBytes, server)
  }
  return server
}

/**
 * Complete the handshake of an upgrade `upgradeProblem` accepted, and speak WebSocket on the socket;
 * `head` is what the client sent after its request.
 */
export const acceptUpgrade = (
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  handlers: WebSocketHandlers,
  maxMessageBytes = 1 << 20
): WebSocketPeer => {
  let peer: WebSocket | undefined
  // `ws` completes a handshake it needs not verify at once: `peer` is set when handleUpgrade returns.
  serverFor(maxMessageBytes).handleUpgrade(req, socket, head, (ws) => {
    peer = ws
  })
  if (peer === undefined) throw new Error("the WebSocket handshake did not complete")
  const ws = peer
  const utf8 = new TextDecoder("utf-8", { fatal: true })
  const isOpen = () => ws.readyState === WebSocket.OPEN
  const close = (code: number, reason = "") => {
    if (!isOpen()) return
    ws.close(code, reason.slice(0, 100))
    setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref()
  }
  ws.on("error", () => {})
  ws.on("close", () => handlers.onClose())
  ws.on("ping", (payload) => {
    if (handlers.answerPings?.() ?? true) ws.pong(payload)
  })
  ws.on("message", (data: Buffer, isBinary) => {
    // Once closing (either side's close frame, or a protocol error), whatever else comes is dropped.
    if (!isOpen()) return
    if (!isBinary) return handlers.onMessage(data.toString("utf8"))
    let text: string
    try {
      text = utf8.decode(data)
    } catch {
      return close(1007, "not UTF-8")
    }
    handlers.onMessage(text)
  })
  return {
    isOpen,
    send: (text) => {
      if (isOpen()) ws.send(text)
    },
    close,
    destroy: () => ws.terminate()
  }
}
