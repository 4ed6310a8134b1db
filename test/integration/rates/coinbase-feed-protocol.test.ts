/**
 * The Coinbase emulator's WebSocket feed (test/emulators/coinbase-feed.ts) as a client hears it, over Node's global
 * WebSocket client and, for the framing, a raw socket: the framing of RFC 6455, the subscribe deadline, subscriptions,
 * ticker messages at the emulator's clock agreeing with its REST ticker and stats, heartbeats, error messages and the
 * stats, and its record of what it published. Its bounds, limits and faults: coinbase-feed-limits.test.ts. Fast cadences (ticks every 100 ms).
 */
import { createHash, randomBytes } from "node:crypto"
import { connect as tcpConnect } from "node:net"
import { describe, expect, it } from "vitest"
import { startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { coinbasePrice, DAY_MS } from "../../emulators/coinbase-data.ts"
import { EMULATOR_NOW } from "../../support/rates.ts"
import { AGENT, connect, DEADLINE_MS, emulator, HEARTBEAT_MS, sleep, subscribe, TICK_MS, until, useFeedEmulator } from "./coinbase-feed-support.ts"

const TICKER_FIELDS = ["type", "sequence", "product_id", "price", "open_24h", "volume_24h", "low_24h", "high_24h", "volume_30d", "best_bid", "best_bid_size", "best_ask", "best_ask_size", "side", "time", "trade_id", "last_size"]

/** The accept key of RFC 6455 §4.2.2, computed here: the server's is the `ws` package's. */
const acceptKey = (key: string) => createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64")

useFeedEmulator()

const get = (path: string) => fetch(`${emulator.url}${path}`).then((r) => r.json() as Promise<any>)

/** A client on a bare TCP socket: the handshake's answer, the server's frames so far, masked frames out. */
const rawClient = async () => {
  const target = new URL(emulator.wsUrl)
  const socket = tcpConnect(Number(target.port), target.hostname)
  const key = randomBytes(16).toString("base64")
  let buffer = Buffer.alloc(0)
  socket.on("data", (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk])
  })
  socket.write(`GET ${target.pathname} HTTP/1.1\r\nHost: ${target.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: ${AGENT}\r\n\r\n`)
  await until(() => buffer.includes("\r\n\r\n"))
  const end = buffer.indexOf("\r\n\r\n") + 4
  const head = buffer.subarray(0, end).toString()
  buffer = buffer.subarray(end)
  const frames = () => {
    const out: Array<{ opcode: number; payload: Buffer }> = []
    for (let offset = 0; offset + 2 <= buffer.length;) {
      let length = buffer[offset + 1]! & 0x7f
      const start = offset + (length === 126 ? 4 : 2)
      if (length === 126) length = buffer.readUInt16BE(offset + 2)
      if (start + length > buffer.length) break
      out.push({ opcode: buffer[offset]! & 0x0f, payload: buffer.subarray(start, start + length) })
      offset = start + length
    }
    return out
  }
  const send = (opcode: number, payload: Buffer, { fin = true, masked = true } = {}) => {
    const mask = randomBytes(4)
    const header = Buffer.from([(fin ? 0x80 : 0) | opcode, (masked ? 0x80 : 0) | payload.length])
    const body = masked ? payload.map((byte, i) => byte ^ mask[i & 3]!) : payload
    socket.write(Buffer.concat([header, ...(masked ? [mask] : []), body]))
  }
  const closed = new Promise((resolve) => socket.once("close", resolve))
  return { head, key, frames, send, socket, closed }
}

describe("the Coinbase emulator's WebSocket feed", () => {
  it("speaks RFC 6455: the accept key, fragmented masked messages with a ping between, pong, the closing handshake; unmasked is 1002", async () => {
    // RFC 6455 §1.3's example.
    expect(acceptKey("dGhlIHNhbXBsZSBub25jZQ==")).toBe("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    const raw = await rawClient()
    expect(raw.head).toMatch(/^HTTP\/1\.1 101 /)
    expect(raw.head).toContain(`Sec-WebSocket-Accept: ${acceptKey(raw.key)}\r\n`)
    expect(raw.head).not.toMatch(/sec-websocket-extensions/i)
    const text = Buffer.from(JSON.stringify(subscribe(["BTC-USD"], ["heartbeat"])))
    raw.send(0x1, text.subarray(0, 20), { fin: false })
    raw.send(0x9, Buffer.from("are you there"))
    raw.send(0x0, text.subarray(20, 40), { fin: false })
    raw.send(0x0, text.subarray(40))
    await until(() => raw.frames().some((f) => f.opcode === 0x1))
    const [pong, answer] = raw.frames()
    expect([pong!.opcode, pong!.payload.toString()]).toEqual([0xa, "are you there"])
    expect(JSON.parse(answer!.payload.toString())).toEqual({ type: "subscriptions", channels: [{ name: "heartbeat", product_ids: ["BTC-USD"] }] })
    raw.send(0x8, Buffer.from([0x03, 0xe8]))
    await until(() => raw.frames().some((f) => f.opcode === 0x8))
    expect(raw.frames().find((f) => f.opcode === 0x8)!.payload.readUInt16BE(0)).toBe(1000)
    await raw.closed

    const bad = await rawClient()
    bad.send(0x1, text, { masked: false })
    await until(() => bad.frames().some((f) => f.opcode === 0x8))
    expect(bad.frames().find((f) => f.opcode === 0x8)!.payload.readUInt16BE(0)).toBe(1002)
    await bad.closed
  })

  it("closes a connection without a subscribe within the deadline (1008), not one that subscribed", async () => {
    const started = performance.now()
    const idle = await connect()
    const subscribed = await connect()
    subscribed.send(subscribe(["BTC-USD"], ["heartbeat"]))
    const closed = await idle.closed
    expect(closed.code).toBe(1008)
    expect(performance.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS - 5)
    // Its deadline, armed at the same time, has passed too.
    await sleep(100)
    expect(subscribed.ws.readyState).toBe(WebSocket.OPEN)
  })

  it("answers subscribe and unsubscribe with all the connection holds; object channels with their own products", async () => {
    const client = await connect()
    const answers = () => client.of("subscriptions").map((m) => Object.fromEntries(m.channels.map((c: any) => [c.name, c.product_ids])))
    client.send(subscribe(["BTC-USD", "ETH-EUR"], ["heartbeat", { name: "ticker", product_ids: ["SOL-USD"] }]))
    await until(() => answers().length === 1)
    expect(answers()[0]).toEqual({ heartbeat: ["BTC-USD", "ETH-EUR"], ticker: ["BTC-USD", "ETH-EUR", "SOL-USD"] })
    client.send(subscribe(["LTC-USD"], ["ticker"]))
    await until(() => answers().length === 2)
    expect(answers()[1]).toEqual({ heartbeat: ["BTC-USD", "ETH-EUR"], ticker: ["BTC-USD", "ETH-EUR", "SOL-USD", "LTC-USD"] })
    client.send({ type: "unsubscribe", product_ids: ["BTC-USD"], channels: ["ticker"] })
    await until(() => answers().length === 3)
    expect(answers()[2]).toEqual({ heartbeat: ["BTC-USD", "ETH-EUR"], ticker: ["ETH-EUR", "SOL-USD", "LTC-USD"] })
    client.send({ type: "unsubscribe", channels: ["heartbeat"] })
    await until(() => answers().length === 4)
    expect(answers()[3]).toEqual({ ticker: ["ETH-EUR", "SOL-USD", "LTC-USD"] })
    expect(client.of("subscriptions")[3].channels).toEqual([{ name: "ticker", product_ids: ["ETH-EUR", "SOL-USD", "LTC-USD"] }])
  })

  it("ticks every tickEveryMs at the frozen clock: price and open_24h from coinbasePrice, as the REST ticker and stats say", async () => {
    const client = await connect()
    client.send(subscribe(["BTC-USD", "ETH-EUR"], ["ticker"]))
    await sleep(6 * TICK_MS + 50)
    for (const id of ["BTC-USD", "ETH-EUR"]) {
      const ticks = client.received.filter((r) => r.message.type === "ticker" && r.message.product_id === id)
      // The last ticker at once on subscribing, without its trade and before the subscriptions answer, as Coinbase has sent it.
      expect(Object.keys(ticks[0]!.message)).toEqual(TICKER_FIELDS.filter((f) => !["side", "time", "trade_id", "last_size"].includes(f)))
      expect(client.received.findIndex((r) => r.message.type === "subscriptions")).toBeGreaterThan(client.received.indexOf(ticks[0]!))
      // Then one a tick, but every fifth trade dropped (sent to nobody).
      expect(ticks.length).toBeGreaterThanOrEqual(4)
      expect(ticks.length).toBeLessThanOrEqual(7)
      const spacing = (ticks.at(-1)!.at - ticks[1]!.at) / (ticks.length - 2)
      expect(spacing).toBeGreaterThan(TICK_MS * 0.7)
      expect(spacing).toBeLessThan(TICK_MS * 2.2)
      const [ticker, stats] = await Promise.all([get(`/products/${id}/ticker`), get(`/products/${id}/stats`)])
      for (const { message } of ticks.slice(1)) {
        expect(Object.keys(message)).toEqual(TICKER_FIELDS)
        expect(message.price).toBe(String(coinbasePrice(id, EMULATOR_NOW)))
        expect(message.open_24h).toBe(String(coinbasePrice(id, EMULATOR_NOW - DAY_MS)))
        expect(Date.parse(message.time)).toBe(EMULATOR_NOW)
        expect(message.time).toBe(ticker.time)
        expect({ price: message.price, bid: message.best_bid, ask: message.best_ask }).toEqual({ price: ticker.price, bid: ticker.bid, ask: ticker.ask })
        expect({ open: message.open_24h, high: message.high_24h, low: message.low_24h, last: message.price, volume: message.volume_24h })
          .toEqual({ open: stats.open, high: stats.high, low: stats.low, last: stats.last, volume: stats.volume })
        expect(["buy", "sell"]).toContain(message.side)
      }
      const sequences = ticks.map((t) => t.message.sequence)
      expect(sequences).toEqual([...sequences].sort((a, b) => a - b))
      expect(new Set(ticks.slice(1).map((t) => t.message.trade_id)).size).toBe(ticks.length - 1)
      expect(ticks.slice(1).every((t) => t.message.trade_id % 5 !== 0), "every fifth trade is dropped").toBe(true)
    }
  })

  it("on the real clock the ticks' time moves and each price is coinbasePrice at its time", async () => {
    emulator.setNow(undefined)
    const client = await connect()
    client.send(subscribe(["SOL-EUR"], ["ticker"]))
    await until(() => client.of("ticker").length >= 3)
    const ticks = client.of("ticker").slice(-2)
    for (const tick of ticks) {
      expect(tick.price).toBe(String(coinbasePrice("SOL-EUR", Date.parse(tick.time))))
      expect(tick.open_24h).toBe(String(coinbasePrice("SOL-EUR", Date.parse(tick.time) - DAY_MS)))
      expect(Math.abs(Date.parse(tick.time) - Date.now())).toBeLessThan(2_000)
    }
    expect(Date.parse(ticks[1].time)).toBeGreaterThan(Date.parse(ticks[0].time))
  })

  it("heartbeats every heartbeatEveryMs per product; a product whose trading is disabled has heartbeats, no ticks", async () => {
    const client = await connect()
    client.send(subscribe(["BTC-USD", "XTZ-USDT"], ["heartbeat", "ticker"]))
    await sleep(3 * HEARTBEAT_MS + 50)
    for (const id of ["BTC-USD", "XTZ-USDT"]) {
      const beats = client.of("heartbeat", id)
      expect(beats.length).toBeGreaterThanOrEqual(2)
      expect(beats.length).toBeLessThanOrEqual(4)
      for (const beat of beats) {
        expect(Object.keys(beat)).toEqual(["type", "last_trade_id", "product_id", "sequence", "time"])
        expect(Date.parse(beat.time)).toBe(EMULATOR_NOW)
      }
    }
    // A heartbeat names the product's last trade: the last the ticker channel told, or one dropped since.
    const messages = client.received.map((r) => r.message)
    const last = client.of("heartbeat", "BTC-USD").at(-1)
    const told = Math.max(...messages.slice(0, messages.indexOf(last)).filter((m) => m.type === "ticker" && m.product_id === "BTC-USD").map((t) => t.trade_id ?? 0))
    expect(last.last_trade_id - told).toBeGreaterThanOrEqual(0)
    expect(last.last_trade_id - told).toBeLessThanOrEqual(1)
    expect(client.of("ticker", "XTZ-USDT")).toEqual([])
  })

  it("answers what it cannot take with Coinbase's error message, takes nothing of it, and stays open", async () => {
    const client = await connect()
    // A subscription first, so that the deadline does not close the connection while the refusals come.
    client.send(subscribe(["ETH-USD"], ["heartbeat"]))
    await until(() => client.of("subscriptions").length === 1)
    const failed = (reason: string) => ({ type: "error", message: "Failed to subscribe", reason })
    const cases: Array<[unknown, unknown]> = [
      [subscribe(["BTC-USD", "FOO-USD"], ["ticker"]), failed("FOO-USD is not a valid product")],
      [subscribe(["DAI-USD"], ["ticker"]), failed("DAI-USD is not a valid product")],
      [subscribe(["BTC-USD"], ["level2"]), failed("level2 is not a valid channel")],
      [{ type: "subscribe", channels: ["heartbeat"] }, failed("You need to specify at least one product ID for channel heartbeat")],
      [{ type: "subscrbe", product_ids: ["BTC-USD"], channels: ["ticker"] }, failed("Type has to be either subscribe or unsubscribe")],
      ["{not json", { type: "error", message: "Malformed JSON" }]
    ]
    for (const [k, [sent, expected]] of cases.entries()) {
      client.send(sent)
      await until(() => client.of("error").length > k)
      expect(client.of("error")[k]).toEqual(expected)
    }
    await sleep(2 * TICK_MS)
    expect([client.of("ticker"), client.of("subscriptions").length]).toEqual([[], 1])
    expect(client.ws.readyState).toBe(WebSocket.OPEN)
    client.send(subscribe(["BTC-USD"], ["ticker"]))
    await until(() => client.of("ticker").length > 0)
    expect(emulator.stats().feed.errors).toBe(cases.length)
  })

  it("counts connections, subscribe messages, ticks and heartbeats sent, per product, also in /__stats", async () => {
    const a = await connect()
    const b = await connect()
    a.send(subscribe(["BTC-USD"], ["ticker", "heartbeat"]))
    b.send(subscribe(["BTC-USD", "ETH-EUR"], ["ticker"]))
    b.send({ type: "unsubscribe", product_ids: ["BTC-USD"], channels: ["ticker"] })
    await sleep(4 * TICK_MS)
    emulator.setFeed("silent")
    await sleep(30)
    const count = (type: string, id: string) => a.of(type, id).length + b.of(type, id).length
    const stats = await fetch(`${emulator.url}/__stats`).then((r) => r.json() as Promise<any>)
    expect(stats.feed).toEqual(emulator.stats().feed)
    expect(stats.feed).toMatchObject({
      mode: "silent",
      connections: 2,
      accepted: 2,
      subscribes: 2,
      unsubscribes: 1,
      ticks: count("ticker", "BTC-USD") + count("ticker", "ETH-EUR"),
      heartbeats: count("heartbeat", "BTC-USD"),
      byProduct: {
        "BTC-USD": { ticks: count("ticker", "BTC-USD"), heartbeats: count("heartbeat", "BTC-USD"), subscribers: 1 },
        "ETH-EUR": { ticks: count("ticker", "ETH-EUR"), heartbeats: 0, subscribers: 1 }
      }
    })
    expect(stats.feed.byProduct["ETH-EUR"].ticks).toBeGreaterThanOrEqual(3)
    emulator.resetStats()
    expect(emulator.stats().feed).toMatchObject({ connections: 2, subscribes: 0, ticks: 0, byProduct: { "BTC-USD": { ticks: 0, subscribers: 1 } } })
  })

  it("keeps what it published: each trade a subscriber read (not the dropped ones) and each heartbeat, also at /__published", async () => {
    emulator.setNow(undefined)
    const client = await connect()
    client.send(subscribe(["BTC-USD"], ["ticker", "heartbeat"]))
    await until(() => client.of("ticker", "BTC-USD").length >= 8 && client.of("heartbeat", "BTC-USD").length >= 2, 10_000)
    emulator.setFeed("silent")
    const published = emulator.feedPublished("BTC-USD")
    // What was sent before the silence may still be on its way.
    await until(() => client.of("heartbeat", "BTC-USD").length === published.heartbeats.length &&
      client.of("ticker", "BTC-USD").filter((t) => t.trade_id !== undefined).length === published.trades.length, 5_000)
    const trades = client.of("ticker", "BTC-USD").filter((t) => t.trade_id !== undefined)
    expect(published.trades).toEqual(trades.map((t) => ({ tradeId: t.trade_id, price: Number(t.price), time: Date.parse(t.time) })))
    expect(published.trades.some((t) => t.tradeId % 5 === 0), "dropped trades are not published").toBe(false)
    expect(published.heartbeats).toEqual(client.of("heartbeat", "BTC-USD").map((h) => ({ lastTradeId: h.last_trade_id, time: Date.parse(h.time) })))
    expect(await get("/__published?product=BTC-USD")).toEqual(published)
    expect(emulator.feedPublished("ETH-USD")).toEqual({ trades: [], heartbeats: [] })
    emulator.resetStats()
    expect(emulator.feedPublished("BTC-USD")).toEqual({ trades: [], heartbeats: [] })
  })

  it("keeps the last recordPerProduct trades and heartbeats of a product, no more", async () => {
    const bounded = await startCoinbaseEmulator({ now: EMULATOR_NOW, feed: { tickEveryMs: 10, heartbeatEveryMs: 10, recordPerProduct: 3 } })
    try {
      const client = await connect(bounded.wsUrl)
      client.send(subscribe(["ETH-USD"], ["ticker", "heartbeat"]))
      await until(() => bounded.stats().feed.ticks >= 10 && bounded.stats().feed.heartbeats >= 10, 10_000)
      bounded.setFeed("silent")
      const { trades, heartbeats } = bounded.feedPublished("ETH-USD")
      expect([trades.length, heartbeats.length]).toEqual([3, 3])
      // The newest: the last heartbeat names the last trade (none dropped after it, or one).
      expect(heartbeats.at(-1)!.lastTradeId - trades.at(-1)!.tradeId).toBeLessThanOrEqual(1)
      expect(trades.map((t) => t.tradeId)).toEqual([...trades.map((t) => t.tradeId)].sort((a, b) => a - b))
      client.ws.close()
    } finally {
      await bounded.close()
    }
  })
})
