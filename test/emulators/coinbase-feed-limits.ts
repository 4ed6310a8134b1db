/**
 * Coinbase Exchange's documented limits of its public WebSocket feed, per client address (all connections
 * from one address together; docs.cdp.coinbase.com/exchange/websocket-feed/rate-limits, summed up in
 * docs/upstreams.md §4), as coinbase-feed.ts enforces them:
 *   - connection requests: 8 a second, bursts up to 20 (a token bucket); past it, 429 at the upgrade;
 *   - messages sent by clients: 100 a second (a sliding second); past it, the connection that sent the
 *     excess gets an error and is closed;
 *   - subscriptions of one product on one channel: 10 (over the address's open connections); the
 *     subscribe that would make an eleventh is refused.
 * Counting only: no I/O, the clock given (performance.now() by default). Erasable TypeScript only.
 */

export interface CoinbaseFeedLimits {
  /** Connection requests a second per address, and the burst allowed (8 and 20, as Coinbase). */
  readonly connectionsPerSecond?: number
  readonly connectionBurst?: number
  /** Messages a second sent by clients, per address (100, as Coinbase). */
  readonly messagesPerSecond?: number
  /** Subscriptions of a product on a channel, per address (10, as Coinbase). */
  readonly subscriptionsPerProduct?: number
}

export interface LimitRefusals {
  /** Upgrades refused 429 for too many connection requests. */
  readonly connections: number
  /** Connections closed for sending too many messages. */
  readonly messages: number
  /** Subscribe messages refused for an eleventh subscription of a product on a channel. */
  readonly subscriptions: number
}

export const makeFeedLimits = (limits: CoinbaseFeedLimits = {}, clock: () => number = () => performance.now()) => {
  const rate = limits.connectionsPerSecond ?? 8
  const burst = limits.connectionBurst ?? 20
  const messagesPerSecond = limits.messagesPerSecond ?? 100
  const perProduct = limits.subscriptionsPerProduct ?? 10
  const buckets = new Map<string, { tokens: number; at: number }>()
  const sent = new Map<string, Array<number>>()
  let refusals = { connections: 0, messages: 0, subscriptions: 0 }

  return {
    perProduct,
    /** A connection request from `address`: whether it is within the bucket (takes a token if so). */
    connect: (address: string): boolean => {
      const at = clock()
      const bucket = buckets.get(address) ?? { tokens: burst, at }
      bucket.tokens = Math.min(burst, bucket.tokens + ((at - bucket.at) / 1000) * rate)
      bucket.at = at
      buckets.set(address, bucket)
      if (bucket.tokens < 1) {
        refusals.connections++
        return false
      }
      bucket.tokens -= 1
      return true
    },
    /** A message from `address`: whether the address is still within its messages of the last second. */
    message: (address: string): boolean => {
      const at = clock()
      const times = (sent.get(address) ?? []).filter((t) => at - t < 1_000)
      times.push(at)
      sent.set(address, times)
      if (times.length <= messagesPerSecond) return true
      refusals.messages++
      return false
    },
    /** A subscribe refused because a product would pass its subscriptions per channel. */
    refusedSubscription: () => void refusals.subscriptions++,
    refusals: (): LimitRefusals => ({ ...refusals }),
    reset: () => {
      refusals = { connections: 0, messages: 0, subscriptions: 0 }
      buckets.clear()
      sent.clear()
    }
  }
}
