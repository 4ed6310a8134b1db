/**
 * The live quotes' parts without I/O (src/rates/coinbase/feed/): what the feed says, read and validated
 * (feedMessages.ts), and the board of quotes it leaves (quoteBoard.ts): live while heard within the
 * silence, observed when the last trade or a heartbeat naming it says, never in our future, down at
 * once when the connection closes, bounded.
 */
import { describe, expect, it } from "vitest"
import { readFeedMessage, subscribeMessage } from "../../../../src/rates/coinbase/feed/feedMessages.ts"
import { type BoardMessage, makeQuoteBoard } from "../../../../src/rates/coinbase/feed/quoteBoard.ts"

const T = Date.UTC(2026, 10, 22, 10)
const iso = (ms: number) => new Date(ms).toISOString().replace("Z", "456Z")
const tick = (price: string, tradeId: number, at: number, product = "BTC-USD") =>
  JSON.stringify({ type: "ticker", sequence: tradeId, product_id: product, price, open_24h: "60000.00", time: iso(at), trade_id: tradeId, side: "buy" })
const beat = (tradeId: number, at: number, product = "BTC-USD") => JSON.stringify({ type: "heartbeat", last_trade_id: tradeId, product_id: product, sequence: 9, time: iso(at) })
const read = (frame: string) => readFeedMessage(frame) as BoardMessage

describe("the feed's messages", () => {
  it("reads ticks and heartbeats into numbers, and refuses what is not a price", () => {
    expect(readFeedMessage(tick("64250.12", 7, T))).toEqual({ type: "ticker", product_id: "BTC-USD", price: 64250.12, open_24h: 60000, time: T, trade_id: 7 })
    expect(readFeedMessage(beat(7, T))).toMatchObject({ type: "heartbeat", last_trade_id: 7, product_id: "BTC-USD" })
    for (const price of ["0", "-1", "1e5", "abc", ""]) expect(readFeedMessage(tick(price, 7, T)), price).toMatchObject({ _tag: "Unreadable", kind: "ticker.price" })
    expect(readFeedMessage(JSON.stringify({ type: "ticker", product_id: "BTC-USD", price: "1", open_24h: "1", time: "yesterday", trade_id: 1 }))).toMatchObject({ _tag: "Unreadable", kind: "ticker.time" })
    expect(readFeedMessage(JSON.stringify({ type: "l2update", product_id: "BTC-USD" }))).toBe("ignored")
    expect(readFeedMessage("not json")).toBe("ignored")
    expect(readFeedMessage(JSON.stringify({ type: "error", message: "Failed to subscribe", reason: "FOO-USD is not a valid product" }))).toMatchObject({ type: "error" })
  })

  it("subscribes pairs to the ticker and heartbeat channels, every pair in one message", () => {
    expect(JSON.parse(subscribeMessage(["BTC-USD"]))).toEqual({ type: "subscribe", product_ids: ["BTC-USD"], channels: ["ticker", "heartbeat"] })
    expect(JSON.parse(subscribeMessage(["BTC-USD", "ETH-EUR", "SOL-USD"])).product_ids).toEqual(["BTC-USD", "ETH-EUR", "SOL-USD"])
  })

  it("issue 32: says which field did not read; the ticker Coinbase sends on subscribing, without its trade, is skipped", () => {
    const numeric = JSON.stringify({ type: "ticker", product_id: "BTC-USD", price: 64250.12, open_24h: 60000, time: iso(T), trade_id: 7 })
    expect(readFeedMessage(numeric)).toMatchObject({ _tag: "Unreadable", kind: "ticker.price" })
    expect(readFeedMessage(JSON.stringify({ type: "heartbeat", product_id: "BTC-USD", last_trade_id: "7", time: iso(T) }))).toMatchObject({ _tag: "Unreadable", kind: "heartbeat.last_trade_id" })
    expect(readFeedMessage(JSON.stringify({ type: "ticker", product_id: "BTC-USD", price: "64250.12", open_24h: "60000.00", time: iso(T) }))).toMatchObject({ _tag: "Unreadable", kind: "ticker.trade_id" })
    const snapshot = { type: "ticker", sequence: 5, product_id: "BTC-USD", price: "64250.12", open_24h: "60000.00", best_bid: "64250.11" }
    expect(readFeedMessage(JSON.stringify(snapshot))).toBe("ignored")
  })
})

describe("the board of live quotes", () => {
  const board = () => {
    const b = makeQuoteBoard({ silenceMs: 30_000, behindMs: 30_000, maxPairs: 3 })
    b.follow(["BTC-USD"])
    return b
  }

  it("a followed pair is live from its first tick: price, 24 h change from the open, observed at the trade", () => {
    const b = board()
    expect(b.quote("BTC-USD", T)).toBeUndefined()
    b.read(read(beat(6, T)), T)
    expect(b.quote("BTC-USD", T), "a heartbeat alone gives no price").toBeUndefined()
    expect(b.read(read(tick("63000", 7, T - 500)), T)).toBe(true)
    expect(b.quote("BTC-USD", T)).toEqual({ price: 63000, change24h: 5, observedAt: T - 500 })
    expect(b.read(read(tick("1", 1, T, "ETH-USD")), T), "a pair not followed").toBe(false)
  })

  it("a heartbeat naming the last trade moves its observation on; one naming a trade we missed moves nothing", () => {
    const b = board()
    b.read(read(tick("63000", 7, T)), T)
    b.read(read(beat(7, T + 5_000)), T + 5_000)
    expect(b.quote("BTC-USD", T + 5_000)?.observedAt).toBe(T + 5_000)
    b.read(read(beat(9, T + 6_000)), T + 6_000)
    expect(b.quote("BTC-USD", T + 6_000)?.observedAt, "trade 9 unseen: the price held is as of its last confirmation").toBe(T + 5_000)
  })

  it("a time ahead of our clock is taken as our clock; an older trade than the one held changes nothing", () => {
    const b = board()
    b.read(read(tick("63000", 7, T + 60_000)), T)
    expect(b.quote("BTC-USD", T)?.observedAt).toBe(T)
    b.read(read(tick("1", 5, T)), T + 1)
    expect(b.quote("BTC-USD", T + 1)?.price).toBe(63000)
  })

  it("down after the silence, or at once when the connection closes, until heard again", () => {
    const b = board()
    b.read(read(tick("63000", 7, T)), T)
    expect(b.quote("BTC-USD", T + 29_999)).toBeDefined()
    expect(b.quote("BTC-USD", T + 30_000)).toBeUndefined()
    b.read(read(beat(7, T + 31_000)), T + 31_000)
    expect(b.quote("BTC-USD", T + 31_000)?.observedAt).toBe(T + 31_000)
    b.disconnected()
    expect(b.quote("BTC-USD", T + 31_001)).toBeUndefined()
    expect(b.summary(T + 31_001)).toEqual({ live: 0, followed: 1, oldestAgeMs: 0 })
  })

  it("follows a bounded number of pairs, says which are new, drops a refused one", () => {
    const b = board()
    expect(b.follow(["BTC-USD", "ETH-USD", "SOL-USD", "XRP-USD"])).toEqual(["ETH-USD", "SOL-USD"])
    expect(b.followed()).toEqual(["BTC-USD", "ETH-USD", "SOL-USD"])
    b.drop("SOL-USD")
    expect(b.follows("SOL-USD")).toBe(false)
    b.read(read(tick("63000", 7, T - 4_000)), T)
    b.read(read(tick("3000", 3, T - 1_000, "ETH-USD")), T)
    expect(b.summary(T)).toEqual({ live: 2, followed: 2, oldestAgeMs: 4_000 })
  })

  it("issue 32: heartbeats naming trades past the last tick read for 30 s make the price unknown; batched or reordered ticks do not", () => {
    const b = board()
    b.read(read(tick("63000", 7, T)), T)
    // Ticks late by a few seconds (batched, reordered): still live, and live again once they come.
    b.read(read(beat(9, T + 1_000)), T + 1_000)
    expect(b.quote("BTC-USD", T + 20_000)?.price).toBe(63000)
    b.read(read(tick("63100", 8, T + 1_000)), T + 25_000)
    expect(b.quote("BTC-USD", T + 40_000), "still behind trade 9 since T + 1 s").toBeUndefined()
    b.read(read(tick("63200", 9, T + 2_000)), T + 41_000)
    expect(b.quote("BTC-USD", T + 41_000)?.price).toBe(63200)
    // Ticks that no longer read while heartbeats go on: unknown after 30 s, though heard every second.
    for (let s = 42; s <= 90; s++) b.read(read(beat(9 + s, T + s * 1_000)), T + s * 1_000)
    expect(b.quote("BTC-USD", T + 71_000)).toBeDefined()
    expect(b.quote("BTC-USD", T + 72_000)).toBeUndefined()
    expect(b.summary(T + 90_000)).toMatchObject({ live: 0, followed: 1 })
  })
})
