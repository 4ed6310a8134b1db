/**
 * The Coinbase emulator's WebSocket feed (test/emulators/coinbase-feed.ts), over Node's global WebSocket
 * client and, for the framing, a raw socket: the subscribe deadline, subscriptions, ticker messages at the
 * emulator's clock agreeing with its REST ticker and stats, heartbeats, error messages, the bounds, the
 * faults (disconnect, refuse, silent, normal) and the stats. Fast cadences (ticks every 100 ms).
 */
import { createHash, randomBytes } from "node:crypto"
import { request } from "node:http"
import { connect as tcpConnect } from "node:net"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { coinbasePrice, DAY_MS } from "../../emulators/coinbase-data.ts"
import { EMULATOR_NOW } from "../../support/rates.ts"

const TICK_MS = 100
const HEARTBEAT_MS = 150
const DEADLINE_MS = 300
const AGENT = "crypto-landing-api/test (+http://localhost)"
const TICKER_FIELDS = ["type", "sequence", "product_id", "price", "open_24h", "volume_24h", "low_24h", "high_24h", "volume_30d", "best_bid", "best_bid_size", "best_ask", "best_ask_size", "side", "time", "trade_id", "last_size"]

let emulator: CoinbaseEmulator
const opened: Array<WebSocket> = []
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
/**
 * The clock the feed's limits per address count by: real time, or held at `heldAt` while a test of those limits says so,
 * so that a burst is one instant however slowly a busy machine sends it.
 */
let heldAt: number | undefined
const limitsClock = () => heldAt ?? performance.now()
/** The accept key of RFC 6455 §4.2.2, computed here: the server's is the `ws` package's. */
const acceptKey = (key: string) => createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64")

beforeAll(async () => {
  emulator = await startCoinbaseEmulator({ now: EMULATOR_NOW, feed: { tickEveryMs: TICK_MS, heartbeatEveryMs: HEARTBEAT_MS, subscribeDeadlineMs: DEADLINE_MS, limitsClock } })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFeed("normal")
  emulator.setNow(EMULATOR_NOW)
  emulator.resetStats()
})
afterEach(async () => {
  heldAt = undefined
  for (const ws of opened.splice(0)) ws.close()
  while (emulator.stats().feed.connections > 0) await sleep(5)
})

interface Received {
  readonly at: number
  readonly message: any
}

/** A feed client: every message received (with its arrival time), and how it closed. */
const connect = (url = emulator.wsUrl) =>
  new Promise<{ ws: WebSocket; received: Array<Received>; closed: Promise<CloseEvent>; send: (m: unknown) => void; of: (type: string, id?: string) => Array<any> }>((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { "user-agent": AGENT } } as unknown as Array<string>)
    opened.push(ws)
    const received: Array<Received> = []
    const closed = new Promise<CloseEvent>((done) => ws.addEventListener("close", done))
    ws.onmessage = (event) => received.push({ at: performance.now(), message: JSON.parse(String(event.data)) })
    ws.onerror = () => reject(new Error("not connected"))
    ws.onopen = () =>
      resolve({
        ws,
        received,
        closed,
        send: (m) => ws.send(typeof m === "string" ? m : JSON.stringify(m)),
        of: (type, id) => received.map((r) => r.message).filter((m) => m.type === type && (id === undefined || m.product_id === id))
      })
  })

/** Waits until `test` holds (polling), or fails after `ms`. */
const until = async (test: () => boolean, ms = 1_000) => {
  const end = performance.now() + ms
  while (!test()) {
    if (performance.now() > end) throw new Error("condition not met in time")
    await sleep(5)
  }
}

const get = (path: string) => fetch(`${emulator.url}${path}`).then((r) => r.json() as Promise<any>)
const control = (body: unknown) => fetch(`${emulator.url}/__control`, { method: "POST", body: JSON.stringify(body) }).then((r) => r.json() as Promise<any>)
const subscribe = (product_ids: Array<string>, channels: Array<unknown>) => ({ type: "subscribe", product_ids, channels })

/** The status a plain HTTP upgrade request gets: 101, or the refusal's. */
const upgradeStatus = (url = emulator.wsUrl, agent: string | null = AGENT) =>
  new Promise<number>((resolve, reject) => {
    const target = new URL(url)
    const headers = {
      connection: "Upgrade",
      upgrade: "websocket",
      "sec-websocket-version": "13",
      "sec-websocket-key": randomBytes(16).toString("base64"),
      ...(agent === null ? {} : { "user-agent": agent })
    }
    const req = request({ host: target.hostname, port: target.port, path: target.pathname, headers })
    req.on("response", (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on("upgrade", (_res, socket) => {
      socket.destroy()
      resolve(101)
    })
    req.on("error", reject)
    req.end()
  })

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

  it("bounds: products per connection (cumulative) and connections (429 on upgrade)", async () => {
    const small = await startCoinbaseEmulator({ now: EMULATOR_NOW, feed: { tickEveryMs: TICK_MS, maxConnections: 2, maxProductsPerConnection: 3 } })
    try {
      const client = await connect(small.wsUrl)
      await connect(small.wsUrl)
      expect(await upgradeStatus(small.wsUrl)).toBe(429)
      client.send(subscribe(["BTC-USD", "ETH-USD", "SOL-USD", "LTC-USD"], ["ticker"]))
      await until(() => client.received.length === 1)
      expect(client.received[0]!.message).toEqual({ type: "error", message: "Failed to subscribe", reason: "too many products: at most 3 per connection" })
      client.send(subscribe(["BTC-USD", "ETH-USD"], ["ticker", "heartbeat"]))
      await until(() => client.of("subscriptions").length === 1)
      client.send(subscribe(["SOL-USD", "LTC-USD"], ["heartbeat"]))
      await until(() => client.of("error").length === 2)
      expect(small.stats().feed).toMatchObject({ connections: 2, accepted: 2, refused: 1, subscribes: 3, errors: 2 })
    } finally {
      await small.close()
    }
  })

  it("disconnect closes every connection now (1001) and clients may reconnect; by method and by control", async () => {
    for (const disconnect of [() => emulator.setFeed("disconnect"), () => control({ feed: "disconnect" })]) {
      const clients = await Promise.all([connect(), connect()])
      for (const client of clients) client.send(subscribe(["BTC-USD"], ["ticker"]))
      await until(() => clients.every((c) => c.of("subscriptions").length === 1))
      await disconnect()
      for (const client of clients) expect((await client.closed).code).toBe(1001)
      await until(() => emulator.stats().feed.connections === 0)
      const again = await connect()
      again.send(subscribe(["BTC-USD"], ["ticker"]))
      await until(() => again.of("ticker").length > 0)
    }
  })

  it("refuse: new upgrades get 503 until normal, open connections keep their ticks", async () => {
    const client = await connect()
    client.send(subscribe(["ETH-USD"], ["ticker"]))
    expect(await control({ feed: "refuse" })).toMatchObject({ feed: "refuse" })
    expect(await upgradeStatus()).toBe(503)
    await expect(connect()).rejects.toThrow("not connected")
    const ticks = client.of("ticker").length
    await until(() => client.of("ticker").length > ticks + 1)
    emulator.setFeed("normal")
    expect(await upgradeStatus()).toBe(101)
    await connect()
    expect(emulator.stats().feed).toMatchObject({ refused: 2, mode: "normal" })
  })

  it("silent: connections stay open and get nothing (no ticks, heartbeats, answers, deadline) until normal", async () => {
    const client = await connect()
    client.send(subscribe(["BTC-USD"], ["ticker", "heartbeat"]))
    await until(() => client.of("ticker").length > 0 && client.of("heartbeat").length > 0)
    emulator.setFeed("silent")
    await sleep(30)
    const heard = client.received.length
    const quiet = await connect()
    client.send(subscribe(["ETH-USD"], ["ticker"]))
    await sleep(DEADLINE_MS + 2 * TICK_MS)
    expect(client.received.length).toBe(heard)
    expect(quiet.received).toEqual([])
    expect([client.ws.readyState, quiet.ws.readyState]).toEqual([WebSocket.OPEN, WebSocket.OPEN])
    emulator.setFeed("normal")
    // The subscribe sent while silent was taken: ETH-USD ticks come too.
    await until(() => client.of("ticker", "ETH-USD").length > 0 && client.of("heartbeat").length > 1)
    expect((await quiet.closed).code).toBe(1008)
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
})

describe("the feed refuses what Coinbase refuses (docs/upstreams.md §4)", () => {
  it("an upgrade without a User-Agent: 400, as Coinbase's REST answers", async () => {
    expect(await upgradeStatus(emulator.wsUrl, null)).toBe(400)
    expect(await upgradeStatus()).toBe(101)
    expect(emulator.stats().feed.callers.byUserAgent).toEqual({ "": 1, [AGENT]: 1 })
  })

  it("per address: 8 connection requests a second, bursts of 20; past them 429 at the upgrade", async () => {
    heldAt = performance.now()
    const statuses = await Promise.all(Array.from({ length: 24 }, () => upgradeStatus()))
    expect(statuses.filter((s) => s === 101)).toHaveLength(20)
    expect(statuses.filter((s) => s === 429)).toHaveLength(4)
    // About 8 a second come back.
    heldAt += 400
    const later = await Promise.all(Array.from({ length: 6 }, () => upgradeStatus()))
    expect(later.filter((s) => s === 101).length).toBeGreaterThanOrEqual(2)
    expect(later.filter((s) => s === 101).length).toBeLessThanOrEqual(5)
    expect(emulator.stats().feed.limited.connections).toBe(4 + later.filter((s) => s === 429).length)
  })

  it("per address: past 100 messages a second from clients (all connections together), the one sending gets an error and is closed", async () => {
    const [a, b] = await Promise.all([connect(), connect()])
    heldAt = performance.now()
    for (let i = 0; i < 60; i++) a.send(subscribe(["BTC-USD"], ["heartbeat"]))
    // All of a's taken first (each answered), so that b's are the ones past the hundred.
    await until(() => a.of("subscriptions").length === 60)
    for (let i = 0; i < 41; i++) b.send(subscribe(["BTC-USD"], ["heartbeat"]))
    expect((await b.closed).code).toBe(1008)
    expect(b.of("error").at(-1)).toMatchObject({ type: "error", message: "Too many messages" })
    expect(a.ws.readyState).toBe(WebSocket.OPEN)
    expect(emulator.stats().feed.limited.messages).toBe(1)
  })

  it("per address: 10 subscriptions of a product on a channel; the eleventh subscribe naming it is refused whole", async () => {
    const clients = await Promise.all(Array.from({ length: 11 }, () => connect()))
    for (const client of clients.slice(0, 10)) client.send(subscribe(["BTC-USD"], ["ticker"]))
    await until(() => clients.slice(0, 10).every((c) => c.of("subscriptions").length === 1))
    const last = clients[10]!
    last.send(subscribe(["ETH-USD", "BTC-USD"], ["ticker"]))
    await until(() => last.of("error").length === 1)
    expect(last.of("error")[0]).toEqual({ type: "error", message: "Failed to subscribe", reason: "BTC-USD has reached 10 subscriptions on ticker from this address" })
    // Another channel, or another product, is another count.
    last.send(subscribe(["BTC-USD", "ETH-USD"], ["heartbeat"]))
    await until(() => last.of("subscriptions").length === 1)
    expect(emulator.stats().feed.limited.subscriptions).toBe(1)
  })

  it("numeric-ticks: ticks write decimals as JSON numbers while heartbeats go on, until normal", async () => {
    const client = await connect()
    client.send(subscribe(["BTC-USD"], ["ticker", "heartbeat"]))
    await until(() => client.of("ticker").length > 1)
    emulator.setFeed("numeric-ticks")
    const before = client.of("ticker").length
    await until(() => client.of("ticker").length > before + 1 && client.of("heartbeat").length > 1)
    const tick = client.of("ticker").at(-1)
    expect([typeof tick.price, typeof tick.open_24h, typeof tick.trade_id]).toEqual(["number", "number", "number"])
    emulator.setFeed("normal")
    const after = client.of("ticker").length
    await until(() => client.of("ticker").length > after)
    expect(typeof client.of("ticker").at(-1).price).toBe("string")
  })
})
