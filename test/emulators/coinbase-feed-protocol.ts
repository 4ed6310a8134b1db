/**
 * The Coinbase feed emulator's messages (coinbase-feed.ts describes the protocol): the channels it emulates, what a
 * subscribe or unsubscribe asks, and the texts of the `subscriptions` and `ticker` messages it writes.
 * Pure: no I/O, no state. Erasable TypeScript only.
 */

export const CHANNELS = ["ticker", "heartbeat"] as const
export type Channel = (typeof CHANNELS)[number]

/** What one connection holds: the products of each channel. */
export type Subscribed = Record<Channel, Set<string>>

/** A subscribe of 200 product ids is about 3 KB. */
export const MAX_MESSAGE_BYTES = 64 * 1024

export type Ticker = Readonly<Record<string, string | number>>

/** What a subscribe or unsubscribe asks: channel → products, or a reason to refuse it. */
export const parseRequest = (message: Record<string, unknown>): Map<Channel, Array<string>> | string => {
  const strings = (value: unknown) => (Array.isArray(value) && value.every((v) => typeof v === "string") ? (value as Array<string>) : undefined)
  const top = message.product_ids === undefined ? [] : strings(message.product_ids)
  if (top === undefined) return "product_ids must be a list of product ids"
  if (!Array.isArray(message.channels)) return "channels must be a list"
  const wanted = new Map<Channel, Array<string>>()
  for (const entry of message.channels as Array<unknown>) {
    const named = typeof entry === "object" && entry !== null ? (entry as Record<string, unknown>) : undefined
    const name = typeof entry === "string" ? entry : named?.name
    const own = named?.product_ids === undefined ? [] : strings(named.product_ids)
    if (own === undefined) return "product_ids must be a list of product ids"
    if (typeof name !== "string" || !(CHANNELS as ReadonlyArray<string>).includes(name)) return `${String(name)} is not a valid channel`
    const channel = name as Channel
    wanted.set(channel, [...new Set([...(wanted.get(channel) ?? []), ...top, ...own])])
  }
  return wanted.size === 0 ? "channels must name at least one channel" : wanted
}

/** The `subscriptions` answer: every channel the connection holds, with its products. */
export const subscriptionsMessage = (subscribed: Subscribed) => ({
  type: "subscriptions",
  channels: CHANNELS.filter((c) => subscribed[c].size > 0).map((name) => ({ name, product_ids: [...subscribed[name]] }))
})

/** The products a connection holds, over all its channels. */
export const productsOf = (subscribed: Subscribed) => new Set(CHANNELS.flatMap((c) => [...subscribed[c]]))

/**
 * A ticker as sent: decimals as strings (Coinbase), or as JSON numbers when `numeric` (mode `numeric-ticks`);
 * `partial`: without the trade's id, time, side and size (the one sent at once on subscribing).
 */
export const tickerText = (ticker: Ticker, partial: boolean, numeric: boolean): string => {
  const out: Record<string, unknown> = { ...ticker }
  if (partial) for (const field of ["trade_id", "time", "side", "last_size"]) delete out[field]
  if (numeric) {
    for (const [field, value] of Object.entries(out)) if (typeof value === "string" && /^\d+\.\d+$/.test(value)) out[field] = Number(value)
  }
  return JSON.stringify(out)
}
