/**
 * What the Coinbase feed emulator (coinbase-feed.ts) sends unasked: a trade of every subscribed product each
 * `tickEveryMs`, at the emulator's `now`, as a `ticker` message to the connections subscribed to it (every
 * `dropEvery`-th trade to nobody: its sequence number jumps), and a `heartbeat` of every product each
 * `heartbeatEveryMs` to those subscribed to heartbeats. Each product's market keeps its sequence, last trade id and
 * last ticker (the one sent at once on subscribing). Timers run while a connection is open. Erasable TypeScript only.
 */
import { coinbaseQuote, coinbaseTime, emulatedProductById, priceText } from "./coinbase-data.ts"
import { type Subscribed, type Ticker, tickerText } from "./coinbase-feed-protocol.ts"
import type { WebSocketPeer } from "./websocket.ts"

/** The market of one product: its message sequence, last trade id and last ticker. */
interface Market {
  sequence: number
  tradeId: number
  lastTicker: Ticker | undefined
}

/** A connection as the ticks see it: where to send, and what it holds. */
export interface Listener {
  readonly peer: WebSocketPeer
  readonly subscribed: Subscribed
}

export interface FeedTicksOptions {
  readonly now: () => number
  readonly tickEveryMs: number
  readonly heartbeatEveryMs: number
  /** Every n-th trade of a product is sent to nobody; 0: none. */
  readonly dropEvery: number
  /** The open connections. */
  readonly listeners: () => Iterable<Listener>
  /** Mode `silent`: nothing is sent. */
  readonly silent: () => boolean
  /** Mode `numeric-ticks`: a ticker's decimals as JSON numbers. */
  readonly numeric: () => boolean
  /** A `ticker` or `heartbeat` message of product `id` was sent to one connection. */
  readonly sent: (kind: "ticks" | "heartbeats", id: string) => void
}

export const makeFeedTicks = (options: FeedTicksOptions) => {
  const { now, dropEvery, listeners, silent, numeric, sent } = options
  const markets = new Map<string, Market>()
  let timers: Array<ReturnType<typeof setInterval>> = []

  const market = (id: string): Market => {
    let m = markets.get(id)
    if (m === undefined) {
      m = { sequence: 0, tradeId: Math.floor(now() / 1000) % 1_000_000_000, lastTicker: undefined }
      markets.set(id, m)
    }
    return m
  }
  /**
   * A trade happens at the emulator's `now`: the product's ticker, or undefined when its trading is
   * disabled or the message is dropped (every `dropEvery`-th: its sequence number is skipped).
   */
  const trade = (id: string): Ticker | undefined => {
    if (emulatedProductById.get(id)?.tradingDisabled !== false) return undefined
    const m = market(id)
    const at = now()
    const quote = coinbaseQuote(id, at)
    m.sequence++
    m.tradeId++
    m.lastTicker = {
      type: "ticker",
      sequence: m.sequence,
      product_id: id,
      price: priceText(quote.price),
      open_24h: priceText(quote.open),
      volume_24h: "23456.78900000",
      low_24h: priceText(quote.low),
      high_24h: priceText(quote.high),
      volume_30d: "701234.56700000",
      best_bid: priceText(quote.bid),
      best_bid_size: "0.50000000",
      best_ask: priceText(quote.ask),
      best_ask_size: "0.50000000",
      side: m.tradeId % 2 === 0 ? "buy" : "sell",
      time: coinbaseTime(at),
      trade_id: m.tradeId,
      last_size: "0.01000000"
    }
    return dropEvery > 0 && m.tradeId % dropEvery === 0 ? undefined : m.lastTicker
  }
  /** The product's last ticker, a trade made now if it has none yet (undefined: its trading is disabled). */
  const lastTicker = (id: string): Ticker | undefined => {
    if (markets.get(id)?.lastTicker === undefined) trade(id)
    return markets.get(id)?.lastTicker
  }

  const tick = () => {
    if (silent()) return
    const wanted = new Set([...listeners()].flatMap((c) => [...c.subscribed.ticker]))
    for (const id of wanted) {
      const ticker = trade(id)
      if (ticker === undefined) continue
      const message = tickerText(ticker, false, numeric())
      for (const connection of listeners()) {
        if (!connection.subscribed.ticker.has(id) || !connection.peer.isOpen()) continue
        connection.peer.send(message)
        sent("ticks", id)
      }
    }
  }

  const heartbeat = () => {
    if (silent()) return
    const time = coinbaseTime(now())
    for (const connection of listeners()) {
      if (!connection.peer.isOpen()) continue
      for (const id of connection.subscribed.heartbeat) {
        const m = market(id)
        connection.peer.send(JSON.stringify({ type: "heartbeat", last_trade_id: m.tradeId, product_id: id, sequence: m.sequence, time }))
        sent("heartbeats", id)
      }
    }
  }

  const start = () => {
    if (timers.length > 0) return
    timers = [setInterval(tick, options.tickEveryMs), setInterval(heartbeat, options.heartbeatEveryMs)]
    for (const timer of timers) timer.unref()
  }
  const stop = () => {
    for (const timer of timers) clearInterval(timer)
    timers = []
  }

  return { lastTicker, tick, heartbeat, start, stop }
}
