/**
 * The stream mode's baseline (streamMode.ts): a raw `node:http` server that writes Coinbase's ticks of BTC-USD,
 * ETH-USD and SOL-USD to every open stream in the service's wire format (src/prices/wire.ts), so that
 * `service / raw` shows what the service costs above what Node needs for the same open responses.
 *
 *   PORT=N COINBASE_WS_URL=ws://… node [the start script's flags] test/bench/streamRaw.ts
 *     prints "listening <port>" when ready
 *
 * The minimum the service cannot avoid either: one WebSocket to the feed (Node's own, as the service's, with a
 * User-Agent: the emulator refuses an upgrade without one), the `ticker` channel of the three pairs; each tick
 * serialised once (`id`, `event: price`, `data: {"symbol","price","change24h","at","source"}`) and written at
 * once to every open response; on open the same head (text/event-stream, no-cache, chunked) and a snapshot of
 * what is held. No limits, no edge, no coalescing, no heartbeats. Any other path: `GET /api/health` 200 (the
 * bench's readiness check). Listens on 127.0.0.1 only. Erasable TypeScript.
 */
import { createServer, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

const PAIRS = ["BTC-USD", "ETH-USD", "SOL-USD"]
const HEAD = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" }

interface Held {
  readonly price: number
  readonly change24h: number
  readonly at: number
}

const url = process.env.COINBASE_WS_URL
if (url === undefined) {
  process.stderr.write("usage: PORT=N COINBASE_WS_URL=ws://… node test/bench/streamRaw.ts\n")
  process.exit(2)
}

const held = new Map<string, Held>()
const open = new Set<ServerResponse>()
let lastId = 0
let stopping = false

const priceJson = (symbol: string, h: Held) =>
  `{"symbol":"${symbol}","price":${h.price},"change24h":${h.change24h},"at":"${new Date(h.at).toISOString()}","source":"coinbase"}`

const snapshot = () =>
  `retry: 3000\n\nid: ${lastId}\nevent: snapshot\ndata: {"currency":"USD","prices":[` +
  PAIRS.flatMap((pair) => {
    const symbol = pair.slice(0, 3)
    const h = held.get(symbol)
    return h === undefined ? [] : [priceJson(symbol, h)]
  }).join(",") + `],"unknown":[]}\n\n`

// Node's WebSocket takes headers in its second argument (undici's WebSocketInit), as the service's does.
const NodeWebSocket = globalThis.WebSocket as unknown as new (url: string, init: { headers: Record<string, string> }) => WebSocket
const feed = new NodeWebSocket(url, { headers: { "user-agent": "stream-bench-raw/1.0" } })
feed.addEventListener("open", () => feed.send(JSON.stringify({ type: "subscribe", product_ids: PAIRS, channels: ["ticker"] })))
feed.addEventListener("message", (message: MessageEvent) => {
  const m = JSON.parse(String(message.data)) as { type?: string; product_id?: string; price?: string; open_24h?: string; time?: string; trade_id?: number }
  // The ticker sent on subscribing has no trade (no time): skipped, as the service skips it.
  if (m.type !== "ticker" || m.time === undefined || m.price === undefined || m.open_24h === undefined) return
  const symbol = m.product_id!.slice(0, 3)
  const price = Number(m.price)
  const open24h = Number(m.open_24h)
  const h: Held = { price, change24h: ((price - open24h) / open24h) * 100, at: Date.parse(m.time) }
  held.set(symbol, h)
  const event = Buffer.from(`id: ${++lastId}\nevent: price\ndata: ${priceJson(symbol, h)}\n\n`)
  for (const res of open) res.write(event)
})
feed.addEventListener("close", () => {
  if (stopping) return
  process.stderr.write("stream raw: the feed closed\n")
  process.exit(1)
})

const server = createServer((req, res) => {
  if (req.url?.startsWith("/api/v1/prices/stream") === true) {
    res.writeHead(200, HEAD)
    res.write(snapshot())
    open.add(res)
    res.once("close", () => open.delete(res))
    return
  }
  res.writeHead(200, { "content-type": "application/json", "content-length": 2 })
  res.end("{}")
})
server.keepAliveTimeout = 5_000

server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`)
})

const stop = () => {
  stopping = true
  feed.close()
  server.close(() => process.exit(0))
  server.closeAllConnections()
  setTimeout(() => process.exit(0), 2_000).unref()
}
process.once("SIGTERM", stop)
process.once("SIGINT", stop)
