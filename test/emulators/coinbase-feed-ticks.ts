/**
 * What the Coinbase feed emulator (coinbase-feed.ts) sends unasked: a trade of every subscribed product each
 * `tickEveryMs`, at the emulator's `now`, as a `ticker` message to the connections subscribed to it (every
 * `dropEvery`-th trade to nobody: its sequence number jumps), and a `heartbeat` of every product each
 * `heartbeatEveryMs` to those subscribed to heartbeats. Each product's market keeps its sequence, last trade id and
 * last ticker (the one sent at once on subscribing), and what the feed published of it (`published`): its last
 * `recordPerProduct` trades sent and heartbeats, the truth a test compares its readers with. Timers run while a
 * connection is open. Erasable TypeScript only.
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

/** A trade whose full ticker went out: its price as sent (a number), its time (epoch ms) and id. */
export interface PublishedTrade {
  readonly tradeId: number
  readonly price: number
  readonly time: number
}
/** A heartbeat of a product as it went out: the trade it named and its time (epoch ms). */
export interface PublishedHeartbeat {
  readonly lastTradeId: number
  readonly time: number
}
/** What the feed published of one product, oldest first, each list its last `recordPerProduct`. */
export interface PublishedRecord {
  readonly trades: ReadonlyArray<PublishedTrade>
  readonly heartbeats: ReadonlyArray<PublishedHeartbeat>
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
  /** Trades and heartbeats kept per product in `published` (default 10,000 each). */
  readonly recordPerProduct?: number
}

export const makeFeedTicks = (options: FeedTicksOptions) => {
  const { now, dropEvery, listeners, silent, numeric, sent } = options
  const markets = new Map<string, Market>()
  let timers: Array<ReturnType<typeof setInterval>> = []
  const recordPerProduct = options.recordPerProduct ?? 10_000
  let records = new Map<string, { trades: Array<PublishedTrade>; heartbeats: Array<PublishedHeartbeat> }>()
  const record = (id: string) => {
    let r = records.get(id)
    if (r === undefined) {
      r = { trades: [], heartbeats: [] }
      records.set(id, r)
    }
    return r
  }
  const keep = <A>(list: Array<A>, entry: A) => {
    list.push(entry)
    // Trimmed a thousand at a time: bounded, without moving the whole list on every entry.
    if (list.length > recordPerProduct + 1_000) list.splice(0, list.length - recordPerProduct)
  }
  const published = (id: string): PublishedRecord => {
    const r = records.get(id)
    return { trades: r?.trades.slice(-recordPerProduct) ?? [], heartbeats: r?.heartbeats.slice(-recordPerProduct) ?? [] }
  }

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
      let to = 0
      for (const connection of listeners()) {
        if (!connection.subscribed.ticker.has(id) || !connection.peer.isOpen()) continue
        connection.peer.send(message)
        sent("ticks", id)
        to++
      }
      if (to > 0) keep(record(id).trades, { tradeId: Number(ticker.trade_id), price: Number(ticker.price), time: Date.parse(String(ticker.time)) })
    }
  }

  const heartbeat = () => {
    if (silent()) return
    const at = now()
    const time = coinbaseTime(at)
    const to = new Set<string>()
    for (const connection of listeners()) {
      if (!connection.peer.isOpen()) continue
      for (const id of connection.subscribed.heartbeat) {
        const m = market(id)
        connection.peer.send(JSON.stringify({ type: "heartbeat", last_trade_id: m.tradeId, product_id: id, sequence: m.sequence, time }))
        sent("heartbeats", id)
        to.add(id)
      }
    }
    for (const id of to) keep(record(id).heartbeats, { lastTradeId: market(id).tradeId, time: at })
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

  return {
    lastTicker,
    tick,
    heartbeat,
    start,
    stop,
    published,
    forget: () => {
      records = new Map()
    }
  }
}
