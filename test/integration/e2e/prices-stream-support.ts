/**
 * Reading the price stream (C10) as a browser's EventSource would: the raw events of GET /api/v1/prices/stream, each
 * with the time it arrived; the Coinbase emulator's own ticks, read on a connection of the test's; and where a
 * stream's price stands in what the emulator's feed published (its own record, not a reader's).
 */
import type { PublishedRecord, PublishedTrade } from "../../emulators/coinbase-feed-ticks.ts"

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

/** How the feed told a price: its trade (`at` the trade's time), or a heartbeat naming that trade (`at` the heartbeat's). */
export interface FeedOrigin {
  readonly trade: PublishedTrade
  readonly by: "trade" | "heartbeat"
  /** When the emulator sent what the price's `at` is: the trade's time, or the heartbeat's. */
  readonly sentAt: number
}

/**
 * The published trade a stream's Coinbase price (`price`, observed `at`) is, in the emulator's record of one product:
 * the trade of that price made at `at`, or the one of that price a heartbeat sent at `at` named (a heartbeat naming
 * a pair's last trade moves its observation on, docs/rates.md "Live quotes"); undefined when the feed told no such price.
 */
export const feedOrigin = (record: PublishedRecord, price: number, at: number): FeedOrigin | undefined => {
  const trade = record.trades.find((t) => t.time === at && t.price === price)
  if (trade !== undefined) return { trade, by: "trade", sentAt: at }
  for (const beat of record.heartbeats) {
    if (beat.time !== at) continue
    const named = record.trades.find((t) => t.tradeId === beat.lastTradeId && t.price === price)
    if (named !== undefined) return { trade: named, by: "heartbeat", sentAt: at }
  }
  return undefined
}

/**
 * The observations a pair's last price may carry once the feed has stopped (`record` taken at that moment): its last
 * trade's price, at the time of any trade of the last run of that price (a stream sends a price when it changes) or of a
 * heartbeat naming one of them.
 */
export const lastFeedPrice = (record: PublishedRecord): { readonly price: number; readonly at: ReadonlySet<number> } => {
  const last = record.trades.at(-1)
  if (last === undefined) throw new Error("the feed published no trade of the pair")
  let first = record.trades.length - 1
  while (first > 0 && record.trades[first - 1]!.price === last.price) first--
  const run = record.trades.slice(first)
  const ids = new Set(run.map((t) => t.tradeId))
  return { price: last.price, at: new Set([...run.map((t) => t.time), ...record.heartbeats.filter((b) => ids.has(b.lastTradeId)).map((b) => b.time)]) }
}

export const waitFor = async (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
