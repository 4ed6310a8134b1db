/**
 * Reading the price stream (C10) as a browser's EventSource would: the raw events of GET /api/v1/prices/stream, each
 * with the time it arrived; and the Coinbase emulator's own ticks, read on a connection of the test's.
 */
import WebSocket from "ws"

export interface StreamEvent {
  readonly id: string | undefined
  readonly event: string | undefined
  readonly data: string
  /** Date.now() when it was read. */
  readonly receivedAt: number
}

export interface OpenStream {
  readonly status: number
  readonly headers: Headers
  readonly events: Array<StreamEvent>
  /** Comment lines read (heartbeats). */
  readonly comments: () => number
  readonly retry: () => string | undefined
  /** Resolves when the server ends the body. */
  readonly ended: Promise<number>
  readonly close: () => void
}

export const openStream = async (url: string, headers: Record<string, string> = {}): Promise<OpenStream> => {
  const abort = new AbortController()
  const response = await fetch(url, { headers, signal: abort.signal })
  const events: Array<StreamEvent> = []
  let comments = 0
  let retry: string | undefined
  const ended = (async () => {
    if (response.body === null || !(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) return Date.now()
    const decoder = new TextDecoder()
    let buffer = ""
    try {
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) !== -1) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const fields = new Map<string, string>()
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) comments++
            const colon = line.indexOf(":")
            if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart())
          }
          if (fields.has("retry")) retry = fields.get("retry")
          if (fields.has("data")) events.push({ id: fields.get("id"), event: fields.get("event"), data: fields.get("data")!, receivedAt: Date.now() })
        }
      }
    } catch {
      // aborted by the test
    }
    return Date.now()
  })()
  return { status: response.status, headers: response.headers, events, comments: () => comments, retry: () => retry, ended, close: () => abort.abort() }
}

export interface Tick {
  readonly product: string
  readonly price: number
  readonly time: number
}

/** The emulator's ticker messages for `products`, as it sends them to any subscriber. */
export const readTicks = async (wsUrl: string, products: ReadonlyArray<string>) => {
  const ticks: Array<Tick> = []
  const socket = new WebSocket(wsUrl, { headers: { "user-agent": "prices-stream-test/1.0 (+https://example.test)" } })
  await new Promise((resolve, reject) => {
    socket.once("open", resolve)
    socket.once("error", reject)
  })
  socket.send(JSON.stringify({ type: "subscribe", product_ids: products, channels: ["ticker"] }))
  socket.on("message", (data) => {
    const message = JSON.parse(String(data)) as { type: string; product_id: string; price: string; time?: string }
    if (message.type === "ticker" && message.time !== undefined) {
      ticks.push({ product: message.product_id, price: Number(message.price), time: Date.parse(message.time) })
    }
  })
  return { ticks, close: () => socket.close() }
}

export const waitFor = async (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
