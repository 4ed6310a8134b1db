/**
 * The Coinbase emulator's WebSocket feed (test/emulators/coinbase-feed.ts) at its edges: its bounds, the limits
 * Coinbase puts on an address, and the faults (disconnect, refuse, silent, numeric-ticks) a test switches on. What it
 * says to a client within them: coinbase-feed-protocol.test.ts. Fast cadences (ticks every 100 ms).
 */
import { randomBytes } from "node:crypto"
import { request } from "node:http"
import { describe, expect, it } from "vitest"
import { startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { EMULATOR_NOW } from "../../support/rates.ts"
import { AGENT, connect, DEADLINE_MS, emulator, holdLimitsClock, sleep, subscribe, TICK_MS, until, useFeedEmulator } from "./coinbase-feed-support.ts"

useFeedEmulator()

const control = (body: unknown) => fetch(`${emulator.url}/__control`, { method: "POST", body: JSON.stringify(body) }).then((r) => r.json() as Promise<any>)

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

describe("the Coinbase emulator's WebSocket feed", () => {
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
})

describe("the feed refuses what Coinbase refuses (docs/upstreams.md §4)", () => {
  it("an upgrade without a User-Agent: 400, as Coinbase's REST answers", async () => {
    expect(await upgradeStatus(emulator.wsUrl, null)).toBe(400)
    expect(await upgradeStatus()).toBe(101)
    expect(emulator.stats().feed.callers.byUserAgent).toEqual({ "": 1, [AGENT]: 1 })
  })

  it("per address: 8 connection requests a second, bursts of 20; past them 429 at the upgrade", async () => {
    const heldAt = performance.now()
    holdLimitsClock(heldAt)
    const statuses = await Promise.all(Array.from({ length: 24 }, () => upgradeStatus()))
    expect(statuses.filter((s) => s === 101)).toHaveLength(20)
    expect(statuses.filter((s) => s === 429)).toHaveLength(4)
    // About 8 a second come back.
    holdLimitsClock(heldAt + 400)
    const later = await Promise.all(Array.from({ length: 6 }, () => upgradeStatus()))
    expect(later.filter((s) => s === 101).length).toBeGreaterThanOrEqual(2)
    expect(later.filter((s) => s === 101).length).toBeLessThanOrEqual(5)
    expect(emulator.stats().feed.limited.connections).toBe(4 + later.filter((s) => s === 429).length)
  })

  it("per address: past 100 messages a second from clients (all connections together), the one sending gets an error and is closed", async () => {
    const [a, b] = await Promise.all([connect(), connect()])
    holdLimitsClock(performance.now())
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
