/**
 * The Coinbase Exchange emulator's WebSocket feed, as Coinbase documents wss://ws-feed.exchange.coinbase.com
 * (docs.cdp.coinbase.com/exchange/websocket-feed): served by coinbase.ts on its own port at `/ws-feed`
 * (`emulator.wsUrl`), plain ws://, the protocol the ws package's (websocket.ts; no compression offered). JSON text messages:
 *   → {"type":"subscribe","product_ids":["BTC-USD"],"channels":["ticker","heartbeat",{"name":"ticker","product_ids":[…]}]}
 *     within `subscribeDeadlineMs` (5 s) of connecting, else the server closes (1008). Subscribing adds to what
 *     the connection holds; "unsubscribe" has the same shape, and without product ids drops the whole channel.
 *   ← {"type":"subscriptions","channels":[{"name":"ticker","product_ids":[…]},{"name":"heartbeat",…}]}: all it holds.
 *   ← {"type":"error","message":"Failed to subscribe","reason":…}, and nothing of that subscribe is taken, for
 *     "FOO-USD is not a valid product" (unknown or delisted), "You need to specify at least one product ID for
 *     channel ticker", "level2 is not a valid channel" (only ticker and heartbeat are emulated), "too many
 *     products: at most 200 per connection"; "Type has to be either subscribe or unsubscribe";
 *     {"type":"error","message":"Malformed JSON"}. The connection stays open.
 *   ← {"type":"ticker","sequence","product_id","price","open_24h","volume_24h","low_24h","high_24h","volume_30d",
 *     "best_bid","best_bid_size","best_ask","best_ask_size","side","time","trade_id","last_size"}: every
 *     `tickEveryMs` (1 s) per subscribed product, one trade at the emulator's `now` (frozen: the same time
 *     and prices again; real: prices move), and the product's last ticker at once on subscribing, as Coinbase
 *     does: without `trade_id`, `time`, `side` and `last_size`, and before the `subscriptions` answer
 *     (`partialFirstTicker`, on by default, as Coinbase has sent it). Every `dropEvery`-th trade (5) is sent
 *     to nobody: sequence numbers jump and a heartbeat may name a trade never sent. Numbers as strings, those of the REST ticker and stats at that instant (`coinbaseQuote`):
 *     `price` = coinbasePrice(id, t), `open_24h` = coinbasePrice(id, t - 24 h). `time` has microseconds.
 *     A product whose trading is disabled (XTZ-USDT) has no trades, so no ticker messages.
 *   ← {"type":"heartbeat","last_trade_id","product_id","sequence","time"}: every `heartbeatEveryMs` (1 s) per
 *     product. `sequence` counts a product's trades (the same for every connection); `trade_id` too.
 * What it published is kept (`published`: each product's last 10,000 trades sent and heartbeats), so that a test
 * compares what a client made of the feed with what the feed sent, not with a reader of its own.
 * Refused as Coinbase refuses: an upgrade without a User-Agent (400); per address, Coinbase's limits
 * (coinbase-feed-limits.ts: 8 connection requests a second, bursts of 20, else 429 at the upgrade; 100 messages
 * a second from clients, else an error and the connection closed; 10 subscriptions of a product on a channel,
 * else the subscribe is refused); a subscribe naming one unknown product is refused whole.
 * Bounds: `maxConnections` (100; the next upgrade gets 429), `maxProductsPerConnection` (200), messages of
 * 64 KiB. Pings are answered. Faults: `coinbaseFeedModes` below. The messages' shapes: coinbase-feed-protocol.ts;
 * the trades and heartbeats on timers: coinbase-feed-ticks.ts. Erasable TypeScript; nothing runs on import.
 */
import type { IncomingMessage } from "node:http"
import type { Duplex } from "node:stream"
import { type CallersStats, makeCallers, userAgentOf } from "./callers.ts"
import { type CoinbaseFeedLimits, type LimitRefusals, makeFeedLimits } from "./coinbase-feed-limits.ts"
import { emulatedProductById } from "./coinbase-data.ts"
import { type Channel, MAX_MESSAGE_BYTES, parseRequest, productsOf, type Subscribed, subscriptionsMessage, tickerText } from "./coinbase-feed-protocol.ts"
import { makeFeedTicks, type PublishedRecord } from "./coinbase-feed-ticks.ts"
import { acceptUpgrade, refuseUpgrade, upgradeProblem, type WebSocketPeer } from "./websocket.ts"

export const COINBASE_FEED_PATH = "/ws-feed"

/**
 * `normal`; `disconnect`: close every connection now (close frame 1001), the standing mode unchanged, so
 * clients may reconnect; `refuse`: new upgrades get 503 until `normal`; `silent`: connections stay open
 * and nothing is sent on them (no answers, ticks, heartbeats or pongs, no deadline closes) until `normal`;
 * `numeric-ticks`: ticks write their decimals as JSON numbers (a format our reader must not trust), heartbeats
 * go on as usual, until `normal`; `cut-off`: each connection is closed (1001) as soon as it has been answered
 * its first subscribe, as Coinbase does to a client it will not serve, until `normal`.
 */
export const coinbaseFeedModes = ["normal", "disconnect", "refuse", "silent", "numeric-ticks", "cut-off"] as const
export type CoinbaseFeedMode = (typeof coinbaseFeedModes)[number]

export interface CoinbaseFeedOptions {
  /** A `ticker` message per subscribed product this often (default 1000 ms). */
  readonly tickEveryMs?: number
  /** A `heartbeat` message per subscribed product this often (default 1000 ms, as Coinbase). */
  readonly heartbeatEveryMs?: number
  /** A connection without a subscription this long after connecting is closed (default 5000 ms, as Coinbase). */
  readonly subscribeDeadlineMs?: number
  /** Open connections at most (default 100); past it, upgrades get 429. */
  readonly maxConnections?: number
  /** Products one connection may subscribe to, over all its channels (default 200); past it, an error message. */
  readonly maxProductsPerConnection?: number
  /** Coinbase's limits per address (coinbase-feed-limits.ts); its documented numbers by default. */
  readonly limits?: CoinbaseFeedLimits
  /** The clock those limits count by, in ms (performance.now() by default): a test may hold it still. */
  readonly limitsClock?: () => number
  /**
   * The ticker sent at once on subscribing lacks `trade_id`, `time`, `side` and `last_size`, as Coinbase's
   * has (docs/upstreams.md §4); default true.
   */
  readonly partialFirstTicker?: boolean
  /** Every n-th trade of a product is sent to nobody (a dropped message: its sequence number jumps); 0: none. Default 5. */
  readonly dropEvery?: number
  /** Trades and heartbeats `published` keeps per product (default 10,000 each). */
  readonly recordPerProduct?: number
}

export interface CoinbaseFeedProductStats {
  /** `ticker` messages sent (one per subscribed connection). */
  readonly ticks: number
  readonly heartbeats: number
  /** Connections subscribed to it now, on any channel. */
  readonly subscribers: number
}

export interface CoinbaseFeedStats {
  /** The standing mode (never `disconnect`). */
  readonly mode: CoinbaseFeedMode
  /** Connections open now. */
  readonly connections: number
  /** The most connections open at once since the counts were last reset. */
  readonly mostOpen: number
  /** Upgrades accepted, and refused (refuse mode, the connection cap, a bad handshake). */
  readonly accepted: number
  readonly refused: number
  /** `subscribe` and `unsubscribe` messages received (refused ones included); error answers (silent: not sent). */
  readonly subscribes: number
  readonly unsubscribes: number
  readonly errors: number
  /** `ticker` and `heartbeat` messages sent, over all connections. */
  readonly ticks: number
  readonly heartbeats: number
  readonly byProduct: Readonly<Record<string, CoinbaseFeedProductStats>>
  /** Refusals by Coinbase's limits per address (coinbase-feed-limits.ts). */
  readonly limited: LimitRefusals
  /** Who asked to connect: User-Agents of the upgrades, and those that carried trace headers. */
  readonly callers: CallersStats
}

export interface CoinbaseFeed {
  /** For the server's `upgrade` event: the feed at COINBASE_FEED_PATH, 404 elsewhere. */
  readonly handleUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void
  readonly setMode: (mode: CoinbaseFeedMode) => void
  /** A trade and a heartbeat of every subscribed product now, at the clock's `now` (a simulated clock's step). */
  readonly publish: () => void
  /** Products the feed refuses ("… is not a valid product") although the REST API lists them; [] by default. */
  readonly setRefusedProducts: (ids: ReadonlyArray<string>) => void
  /** Resets the counts, and forgets what was published. */
  readonly resetStats: () => void
  readonly stats: () => CoinbaseFeedStats
  /** What the feed published of a product: its last trades sent (dropped ones are not) and heartbeats, oldest first. */
  readonly published: (productId: string) => PublishedRecord
  /** Cut every connection and stop the timers. */
  readonly close: () => void
}

interface Connection {
  /** The client's address: Coinbase's limits bind all connections from one address together. */
  readonly address: string
  readonly peer: WebSocketPeer
  readonly subscribed: Subscribed
  deadline: ReturnType<typeof setTimeout> | undefined
}

export const createCoinbaseFeed = (now: () => number, options: CoinbaseFeedOptions = {}): CoinbaseFeed => {
  const tickEveryMs = options.tickEveryMs ?? 1_000
  const heartbeatEveryMs = options.heartbeatEveryMs ?? 1_000
  const deadlineMs = options.subscribeDeadlineMs ?? 5_000
  const maxConnections = options.maxConnections ?? 100
  const maxProducts = options.maxProductsPerConnection ?? 200
  const partialFirstTicker = options.partialFirstTicker ?? true
  const dropEvery = options.dropEvery ?? 5
  const limits = makeFeedLimits(options.limits, options.limitsClock)
  let refusedProducts = new Set<string>()
  const connections = new Set<Connection>()
  let mode: Exclude<CoinbaseFeedMode, "disconnect"> = "normal"
  const zero = () => ({ mostOpen: 0, accepted: 0, refused: 0, subscribes: 0, unsubscribes: 0, errors: 0, ticks: 0, heartbeats: 0 })
  let counts = zero()
  let byProduct = new Map<string, { ticks: number; heartbeats: number }>()
  const callers = makeCallers()

  const countFor = (id: string) => {
    const entry = byProduct.get(id) ?? { ticks: 0, heartbeats: 0 }
    byProduct.set(id, entry)
    return entry
  }
  const sent = (kind: "ticks" | "heartbeats", id: string) => {
    counts[kind]++
    countFor(id)[kind]++
  }
  const ticks = makeFeedTicks({
    now,
    tickEveryMs,
    heartbeatEveryMs,
    dropEvery,
    listeners: () => connections,
    silent: () => mode === "silent",
    numeric: () => mode === "numeric-ticks",
    sent,
    ...(options.recordPerProduct === undefined ? {} : { recordPerProduct: options.recordPerProduct })
  })

  const send = (connection: Connection, message: unknown) => {
    if (mode !== "silent") connection.peer.send(typeof message === "string" ? message : JSON.stringify(message))
  }
  const error = (connection: Connection, message: string, reason?: string) => {
    counts.errors++
    send(connection, reason === undefined ? { type: "error", message } : { type: "error", message, reason })
  }
  const subscriptions = (connection: Connection) => subscriptionsMessage(connection.subscribed)
  /** Connections from `address` subscribed to `id` on `channel`. */
  const subscribersFrom = (address: string, channel: Channel, id: string) =>
    [...connections].filter((c) => c.address === address && c.subscribed[channel].has(id)).length

  const subscribe = (connection: Connection, wanted: Map<Channel, Array<string>>) => {
    for (const [channel, ids] of wanted) {
      if (ids.length === 0) return error(connection, "Failed to subscribe", `You need to specify at least one product ID for channel ${channel}`)
      // One unknown product refuses the whole message (coinbase-pro-node#174).
      const invalid = ids.find((id) => emulatedProductById.get(id)?.status !== "online" || refusedProducts.has(id))
      if (invalid !== undefined) return error(connection, "Failed to subscribe", `${invalid} is not a valid product`)
      const crowded = ids.find((id) => !connection.subscribed[channel].has(id) && subscribersFrom(connection.address, channel, id) >= limits.perProduct)
      if (crowded !== undefined) {
        limits.refusedSubscription()
        return error(connection, "Failed to subscribe", `${crowded} has reached ${limits.perProduct} subscriptions on ${channel} from this address`)
      }
    }
    const after = productsOf(connection.subscribed)
    for (const ids of wanted.values()) for (const id of ids) after.add(id)
    if (after.size > maxProducts) {
      return error(connection, "Failed to subscribe", `too many products: at most ${maxProducts} per connection`)
    }
    const newTickers: Array<string> = []
    for (const [channel, ids] of wanted) {
      for (const id of ids) {
        if (channel === "ticker" && !connection.subscribed.ticker.has(id)) newTickers.push(id)
        connection.subscribed[channel].add(id)
      }
    }
    clearTimeout(connection.deadline)
    connection.deadline = undefined
    // As Coinbase does, a new ticker subscription gets the product's last ticker at once; it has come
    // without its trade's id, time, side and size, and before the subscriptions message.
    const firsts = newTickers.map((id) => [id, ticks.lastTicker(id)] as const)
    if (!partialFirstTicker) send(connection, subscriptions(connection))
    for (const [id, last] of firsts) {
      if (last !== undefined && mode !== "silent") {
        send(connection, tickerText(last, partialFirstTicker, mode === "numeric-ticks"))
        sent("ticks", id)
      }
    }
    if (partialFirstTicker) send(connection, subscriptions(connection))
    if (mode === "cut-off") connection.peer.close(1001, "going away")
  }

  const unsubscribe = (connection: Connection, wanted: Map<Channel, Array<string>>) => {
    // Without product ids, the whole channel.
    for (const [channel, ids] of wanted) {
      if (ids.length === 0) connection.subscribed[channel].clear()
      else for (const id of ids) connection.subscribed[channel].delete(id)
    }
    send(connection, subscriptions(connection))
  }

  const onMessage = (connection: Connection, text: string) => {
    if (!limits.message(connection.address)) {
      error(connection, "Too many messages", `more than ${options.limits?.messagesPerSecond ?? 100} messages a second from this address`)
      return connection.peer.close(1008, "rate limit exceeded")
    }
    let message: unknown
    try {
      message = JSON.parse(text)
    } catch {
      return error(connection, "Malformed JSON")
    }
    const body = typeof message === "object" && message !== null ? (message as Record<string, unknown>) : {}
    if (body.type !== "subscribe" && body.type !== "unsubscribe") {
      return error(connection, "Failed to subscribe", "Type has to be either subscribe or unsubscribe")
    }
    if (body.type === "subscribe") counts.subscribes++
    else counts.unsubscribes++
    const wanted = parseRequest(body)
    if (typeof wanted === "string") return error(connection, body.type === "subscribe" ? "Failed to subscribe" : "Failed to unsubscribe", wanted)
    return body.type === "subscribe" ? subscribe(connection, wanted) : unsubscribe(connection, wanted)
  }

  const armDeadline = (connection: Connection) => {
    connection.deadline = setTimeout(() => {
      // A silent feed closes nothing: the deadline waits for it to speak again.
      if (mode === "silent") return armDeadline(connection)
      connection.peer.close(1008, "no subscribe message within the deadline")
    }, deadlineMs)
    connection.deadline.unref()
  }

  const handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = new URL(req.url ?? "/", "http://emulator.invalid").pathname
    const refuse = (status: number, reason: string, message: string, headers?: Record<string, string>) => {
      counts.refused++
      refuseUpgrade(socket, status, reason, { message }, headers)
    }
    if (path !== COINBASE_FEED_PATH) return refuse(404, "Not Found", "NotFound")
    const address = req.socket.remoteAddress ?? ""
    if (!limits.connect(address)) return refuse(429, "Too Many Requests", "Too many connection requests")
    callers.note(req)
    // Coinbase's REST API answers a call without one 400; its feed's upgrade is taken to do the same.
    if (userAgentOf(req) === undefined) return refuse(400, "Bad Request", "User-Agent header is required.")
    const problem = upgradeProblem(req)
    if (problem !== undefined) return refuse(problem[0], problem[1], "not a WebSocket upgrade", problem[0] === 426 ? { "sec-websocket-version": "13" } : {})
    if (mode === "refuse") return refuse(503, "Service Unavailable", "Service Unavailable")
    if (connections.size >= maxConnections) return refuse(429, "Too Many Requests", "Too many connections")
    counts.accepted++
    const connection: Connection = {
      address,
      subscribed: { ticker: new Set(), heartbeat: new Set() },
      deadline: undefined,
      peer: acceptUpgrade(req, socket, head, {
        onMessage: (text) => onMessage(connection, text),
        onClose: () => {
          clearTimeout(connection.deadline)
          connections.delete(connection)
          if (connections.size === 0) ticks.stop()
        },
        answerPings: () => mode !== "silent"
      }, MAX_MESSAGE_BYTES)
    }
    connections.add(connection)
    counts.mostOpen = Math.max(counts.mostOpen, connections.size)
    armDeadline(connection)
    ticks.start()
  }

  const stats = (): CoinbaseFeedStats => {
    const products: Record<string, CoinbaseFeedProductStats> = {}
    const subscribers = new Map<string, number>()
    for (const connection of connections) for (const id of productsOf(connection.subscribed)) subscribers.set(id, (subscribers.get(id) ?? 0) + 1)
    for (const id of [...new Set([...byProduct.keys(), ...subscribers.keys()])].sort()) {
      const entry = byProduct.get(id) ?? { ticks: 0, heartbeats: 0 }
      products[id] = { ticks: entry.ticks, heartbeats: entry.heartbeats, subscribers: subscribers.get(id) ?? 0 }
    }
    return { mode, connections: connections.size, ...counts, byProduct: products, limited: limits.refusals(), callers: callers.stats() }
  }

  return {
    handleUpgrade,
    setMode: (next) => {
      if (!coinbaseFeedModes.includes(next)) throw new Error(`unknown feed mode ${String(next)}`)
      if (next !== "disconnect") mode = next
      else for (const connection of connections) connection.peer.close(1001, "going away")
    },
    publish: () => {
      ticks.tick()
      ticks.heartbeat()
    },
    setRefusedProducts: (ids) => {
      refusedProducts = new Set(ids)
    },
    resetStats: () => {
      counts = zero()
      byProduct = new Map()
      callers.reset()
      limits.reset()
      ticks.forget()
    },
    stats,
    published: ticks.published,
    close: () => {
      ticks.stop()
      for (const connection of connections) {
        clearTimeout(connection.deadline)
        connection.peer.destroy()
      }
    }
  }
}
