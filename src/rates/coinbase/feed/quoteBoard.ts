/**
 * The live quotes per Coinbase pair (CONTRACT C4, "Live quotes"); pure state, no clock of its own. A pair is live
 * once a tick gave its price, while a tick or heartbeat came within `silenceMs`, unless heartbeats named a later
 * trade than its last tick for `behindMs` (ticks lost). A heartbeat naming the tick's trade moves `observedAt` on.
 */
import { change24h } from "../candles.ts"

interface BoardQuote {
  readonly price: number
  /** % over 24 hours, from the tick's `open_24h`. */
  readonly change24h: number
  /** Epoch ms: when this price was last known to hold. */
  readonly observedAt: number
}
interface Pair {
  price: number | undefined
  open24h: number | undefined
  tradeId: number
  observedAt: number
  /** Our clock when a tick or heartbeat of it was last read; 0: not since the connection (re)opened. */
  heardAt: number
  namedTradeId: number
  /** Our clock since when heartbeats have named a trade past `tradeId`; undefined while they do not. */
  behindSince: number | undefined
}
export type BoardMessage =
  | { readonly type: "ticker"; readonly product_id: string; readonly price: number; readonly open_24h: number; readonly time: number; readonly trade_id: number }
  | { readonly type: "heartbeat"; readonly product_id: string; readonly last_trade_id: number; readonly time: number }
export interface QuoteBoard {
  /** Adds pairs to follow; returns those new to the board (to subscribe to), within the bound. */
  readonly follow: (productIds: ReadonlyArray<string>) => ReadonlyArray<string>
  readonly follows: (productId: string) => boolean
  readonly followed: () => ReadonlyArray<string>
  readonly drop: (productId: string) => void
  /** A tick or heartbeat read at `now` (our clock); whether it was of a pair followed. */
  readonly read: (message: BoardMessage, now: number) => boolean
  /** The connection closed: every pair is down until it is heard again. */
  readonly disconnected: () => void
  /** The live quote of the pair at `now`, or undefined when it is down. */
  readonly quote: (productId: string, now: number) => BoardQuote | undefined
  /** Pairs live at `now`, and the age (ms) of the oldest live quote (0 when none). */
  readonly summary: (now: number) => { readonly live: number; readonly followed: number; readonly oldestAgeMs: number }
}
export interface QuoteBoardOptions {
  readonly silenceMs: number
  readonly behindMs: number
  /** Pairs followed at most (a subscription per pair; Coinbase's curated majors in a few currencies fit). */
  readonly maxPairs: number
}

export const makeQuoteBoard = (options: QuoteBoardOptions): QuoteBoard => {
  const pairs = new Map<string, Pair>()

  const isLive = (pair: Pair, now: number) =>
    pair.price !== undefined && pair.heardAt > 0 && now - pair.heardAt < options.silenceMs &&
    (pair.behindSince === undefined || now - pair.behindSince < options.behindMs)

  const follow = (productIds: ReadonlyArray<string>) => {
    const added: Array<string> = []
    for (const id of productIds) {
      if (pairs.has(id) || pairs.size >= options.maxPairs) continue
      pairs.set(id, { price: undefined, open24h: undefined, tradeId: -1, observedAt: 0, heardAt: 0, namedTradeId: -1, behindSince: undefined })
      added.push(id)
    }
    return added
  }

  const read = (message: BoardMessage, now: number) => {
    const pair = pairs.get(message.product_id)
    if (pair === undefined) return false
    pair.heardAt = now
    if (message.type === "ticker") {
      // An older trade than the one held (messages reordered across a reconnect) changes nothing.
      if (message.trade_id < pair.tradeId) return true
      pair.price = message.price
      pair.open24h = message.open_24h
      pair.tradeId = message.trade_id
      pair.observedAt = Math.min(message.time, now)
      if (pair.tradeId >= pair.namedTradeId) pair.behindSince = undefined
    } else {
      pair.namedTradeId = Math.max(pair.namedTradeId, message.last_trade_id)
      if (message.last_trade_id === pair.tradeId) pair.observedAt = Math.max(pair.observedAt, Math.min(message.time, now))
      if (pair.namedTradeId > pair.tradeId) pair.behindSince ??= now
    }
    return true
  }

  const quote = (productId: string, now: number): BoardQuote | undefined => {
    const pair = pairs.get(productId)
    if (pair === undefined || !isLive(pair, now)) return undefined
    const { open24h, price } = pair
    if (price === undefined || open24h === undefined) return undefined
    return { price, change24h: change24h({ open: open24h, last: price }), observedAt: pair.observedAt }
  }

  const summary = (now: number) => {
    let live = 0
    let oldest = now
    for (const pair of pairs.values()) {
      if (!isLive(pair, now)) continue
      live++
      oldest = Math.min(oldest, pair.observedAt)
    }
    return { live, followed: pairs.size, oldestAgeMs: now - oldest }
  }

  return {
    follow,
    follows: (productId) => pairs.has(productId),
    followed: () => [...pairs.keys()],
    drop: (productId) => void pairs.delete(productId),
    read,
    disconnected: () => {
      for (const pair of pairs.values()) pair.heardAt = 0
    },
    quote,
    summary
  }
}
