/**
 * The server side of RFC 6455 WebSocket, enough for the emulators' feeds, on Node's `http` `upgrade`
 * event: the opening handshake (Sec-WebSocket-Accept, version 13, no extension accepted, so no
 * compression), text frames out (unmasked), client frames in (masked, else 1002), fragmented messages
 * in (continuations, control frames between them), ping answered with pong, the closing handshake
 * both ways, 1009 past `maxMessageBytes`, 1007 for text that is not UTF-8.
 * Erasable TypeScript only: Node runs it directly. Nothing runs on import.
 */
import { createHash } from "node:crypto"
import type { IncomingMessage } from "node:http"
import type { Socket } from "node:net"
import type { Duplex } from "node:stream"

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
const TEXT = 0x1
const CLOSE = 0x8
const PING = 0x9
const PONG = 0xa
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

/** The accept key of RFC 6455 §4.2.2. */
export const acceptKey = (key: string): string => createHash("sha1").update(key + GUID).digest("base64")

/** Refuse an upgrade with a plain HTTP answer, and end the connection. */
export const refuseUpgrade = (socket: Duplex, status: number, reason: string, body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body)
  const lines = [`HTTP/1.1 ${status} ${reason}`, "content-type: application/json; charset=utf-8", `content-length: ${Buffer.byteLength(text)}`, "connection: close"]
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
  socket.on("error", () => {})
  socket.end(`${lines.join("\r\n")}\r\n\r\n${text}`)
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref()
}

/** Why the request cannot be upgraded ([status, reason]), or undefined when it can. */
export const upgradeProblem = (req: IncomingMessage): readonly [number, string] | undefined => {
  if (req.method !== "GET") return [405, "Method Not Allowed"]
  if (!/\bwebsocket\b/i.test(req.headers.upgrade ?? "")) return [400, "Bad Request"]
  if (req.headers["sec-websocket-version"] !== "13") return [426, "Upgrade Required"]
  const key = req.headers["sec-websocket-key"]
  if (typeof key !== "string" || Buffer.from(key, "base64").length !== 16) return [400, "Bad Request"]
  return undefined
}

const frame = (opcode: number, payload: Buffer): Buffer => {
  const n = payload.length
  const header = Buffer.alloc(n < 126 ? 2 : n < 65_536 ? 4 : 10)
  header[0] = 0x80 | opcode
  if (n < 126) header[1] = n
  else if (n < 65_536) {
    header[1] = 126
    header.writeUInt16BE(n, 2)
  } else {
    header[1] = 127
    header.writeBigUInt64BE(BigInt(n), 2)
  }
  return Buffer.concat([header, payload])
}

const closePayload = (code: number, reason = "") => {
  const text = Buffer.from(reason.slice(0, 100))
  const payload = Buffer.alloc(2 + text.length)
  payload.writeUInt16BE(code, 0)
  text.copy(payload, 2)
  return payload
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
  let state: "open" | "closing" | "closed" = "open"
  let buffered: Buffer = Buffer.alloc(0)
  let fragments: Array<Buffer> | undefined
  let fragmentBytes = 0
  const utf8 = new TextDecoder("utf-8", { fatal: true })

  const write = (bytes: Buffer) => {
    if (!socket.destroyed && socket.writable) socket.write(bytes)
  }
  const destroy = () => {
    state = state === "closed" ? state : "closing"
    socket.destroy()
  }
  const close = (code: number, reason?: string) => {
    if (state !== "open") return
    state = "closing"
    write(frame(CLOSE, closePayload(code, reason)))
    socket.end()
    setTimeout(destroy, CLOSE_GRACE_MS).unref()
  }

  const onFrame = (fin: boolean, opcode: number, payload: Buffer) => {
    if (opcode >= CLOSE) {
      if (!fin || payload.length > 125) return close(1002, "bad control frame")
      if (opcode === CLOSE) {
        // Echo the peer's code (RFC 6455 §5.5.1), then end: the server closes the TCP connection first.
        state = "closing"
        write(frame(CLOSE, payload.length >= 2 ? payload.subarray(0, 2) : Buffer.alloc(0)))
        socket.end()
        setTimeout(destroy, CLOSE_GRACE_MS).unref()
        return
      }
      if (opcode === PING) {
        if ((handlers.answerPings?.() ?? true)) write(frame(PONG, payload))
        return
      }
      if (opcode === PONG) return
      return close(1002, "unknown opcode")
    }
    if (opcode === 0) {
      if (fragments === undefined) return close(1002, "continuation without a first frame")
    } else if (opcode === TEXT || opcode === 0x2) {
      if (fragments !== undefined) return close(1002, "new message inside a fragmented one")
      fragments = []
      fragmentBytes = 0
    } else return close(1002, "unknown opcode")
    fragments.push(payload)
    fragmentBytes += payload.length
    if (fragmentBytes > maxMessageBytes) return close(1009, "message too big")
    if (!fin) return
    const message = Buffer.concat(fragments)
    fragments = undefined
    let text: string
    try {
      text = utf8.decode(message)
    } catch {
      return close(1007, "not UTF-8")
    }
    handlers.onMessage(text)
  }

  const parse = () => {
    // Once closing (either side's close frame, or a protocol error), whatever else comes is dropped.
    while (state === "open" && buffered.length >= 2) {
      const b0 = buffered[0]!
      const b1 = buffered[1]!
      let length = b1 & 0x7f
      let offset = 2
      if (length === 126) {
        if (buffered.length < 4) return
        length = buffered.readUInt16BE(2)
        offset = 4
      } else if (length === 127) {
        if (buffered.length < 10) return
        const big = buffered.readBigUInt64BE(2)
        length = big > BigInt(maxMessageBytes) ? Number.POSITIVE_INFINITY : Number(big)
        offset = 10
      }
      if ((b0 & 0x70) !== 0) return close(1002, "reserved bits set")
      if ((b1 & 0x80) === 0) return close(1002, "client frames must be masked")
      if (length > maxMessageBytes) return close(1009, "message too big")
      if (buffered.length < offset + 4 + length) return
      const mask = buffered.subarray(offset, offset + 4)
      const payload = Buffer.from(buffered.subarray(offset + 4, offset + 4 + length))
      for (let i = 0; i < payload.length; i++) payload[i] = payload[i]! ^ mask[i & 3]!
      buffered = buffered.subarray(offset + 4 + length)
      onFrame((b0 & 0x80) !== 0, b0 & 0x0f, payload)
    }
  }

  socket.on("error", () => {})
  socket.on("close", () => {
    if (state === "closed") return
    state = "closed"
    handlers.onClose()
  })
  socket.on("data", (chunk: Buffer) => {
    if (state !== "open") return
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk])
    parse()
  })
  const key = req.headers["sec-websocket-key"] as string
  socket.write(
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      `Sec-WebSocket-Accept: ${acceptKey(key)}\r\n\r\n`
  )
  const tcp = socket as Duplex & Partial<Pick<Socket, "setNoDelay">>
  tcp.setNoDelay?.(true)
  // What came with the request is read on the next tick: the caller holds the peer by then.
  if (head.length > 0) {
    buffered = Buffer.from(head)
    process.nextTick(parse)
  }

  return {
    isOpen: () => state === "open",
    send: (text) => {
      if (state === "open") write(frame(TEXT, Buffer.from(text)))
    },
    close,
    destroy
  }
}
