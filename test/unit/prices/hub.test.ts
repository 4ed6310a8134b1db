/** The price hub (src/prices/hub.ts, C10) on fake sinks and a fake source: rounds driven by hand, no timer, no socket. */
import { describe, expect, it } from "vitest"
import { makeHub, type Refusal, type StreamSink } from "../../../src/prices/hub.ts"
import type { HeldPrice } from "../../../src/prices/PriceSource.ts"

const fakeSink = (buffered = () => 0) => {
  const chunks: Array<string> = []
  let onClose: (() => void) | undefined
  const state = { ended: false, destroyed: false }
  const sink: StreamSink = {
    write: (chunk) => chunks.push(Buffer.from(chunk).toString()),
    get writableLength() {
      return buffered()
    },
    end: () => void (state.ended = true, onClose?.()),
    destroy: () => void (state.destroyed = true, onClose?.()),
    once: (_event, listener) => void (onClose = listener)
  }
  const events = () => chunks.join("").split("\n\n").filter((b) => b.includes("data: ")).map((b) => {
    const field = (name: string) => b.split("\n").find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2)
    return { id: Number(field("id")), event: field("event")!, data: JSON.parse(field("data")!) }
  })
  return { sink, chunks, events, state, close: () => onClose?.() }
}

const setup = (options: { maxPerAddress?: number; maxStreams?: number; maxBufferedBytes?: number } = {}) => {
  let now = 0
  const prices = new Map<string, HeldPrice>([["BTC", { price: 1, change24h: null, at: 0, source: "coinbase" }]])
  const hub = makeHub({
    roundMs: 50,
    spacingMs: 250,
    heartbeatMs: 1_000,
    maxBufferedBytes: options.maxBufferedBytes ?? 1024,
    maxPerAddress: options.maxPerAddress ?? 100,
    maxStreams: options.maxStreams ?? 100,
    now: () => now,
    read: (query, done) => done({ prices: new Map([...prices].filter(([s]) => query.symbols.includes(s))), unknown: query.symbols.filter((s) => !["BTC", "ETH"].includes(s)) })
  })
  const open = (symbols: Array<string>, bucket = "a", sink = fakeSink()) => {
    let refused: Refusal | undefined
    hub.open({ symbols, currency: "usd", bucket, caller: undefined }, { refuse: (r) => void (refused = r), start: () => sink.sink })
    return { ...sink, refused: () => refused }
  }
  const set = (symbol: string, price: number) => prices.set(symbol, { price, change24h: 0.5, at: now, source: "coinbase" })
  return { hub, open, set, advance: (ms: number) => void (now += ms) }
}

describe("the price hub", () => {
  it("opens with the retry field and a snapshot of what is held, unknown symbols listed, a symbol not held left out", () => {
    const { open } = setup()
    const s = open(["BTC", "ETH", "FOO"])
    expect(s.chunks[0]).toMatch(/^retry: 3000\n\nid: \d+\nevent: snapshot\n/)
    expect(s.events()[0]!.data).toEqual({ currency: "USD", prices: [{ symbol: "BTC", price: 1, change24h: null, at: "1970-01-01T00:00:00.000Z", source: "coinbase" }], unknown: ["FOO"] })
  })

  it("writes one event per changed symbol per round, the latest winning, ids increasing; a first price comes as an event", () => {
    const { hub, open, set } = setup()
    const s = open(["BTC", "ETH"])
    set("BTC", 2)
    set("BTC", 3)
    set("ETH", 10)
    hub.round()
    hub.round() // nothing changed: nothing written
    const events = s.events()
    expect(events.map((e) => [e.event, e.data.symbol, e.data.price])).toEqual([["snapshot", undefined, undefined], ["price", "BTC", 3], ["price", "ETH", 10]])
    for (let i = 1; i < events.length; i++) expect(events[i]!.id).toBeGreaterThan(events[i - 1]!.id)
  })

  it("shares one buffer among the streams of a group, and a joining stream's snapshot is what the group holds", () => {
    const { advance, hub, open, set } = setup()
    const a = open(["BTC"])
    set("BTC", 5)
    hub.round()
    const b = open(["BTC"])
    expect(b.events()[0]!.data.prices[0].price).toBe(5)
    advance(250)
    set("BTC", 6)
    hub.round()
    expect(a.chunks.at(-1)).toBe(b.chunks.at(-1))
    expect(b.events().map((e) => e.data.price ?? e.data.prices[0].price)).toEqual([5, 6])
    expect(hub.stats()).toMatchObject({ open: 2, groups: 1 })
  })

  it("sends a symbol at most once per spacing: a change inside it goes out at the first round after, the latest winning, with an id above the snapshot of a stream that joined meanwhile", () => {
    const { advance, hub, open, set } = setup()
    const a = open(["BTC", "ETH"])
    set("BTC", 2)
    hub.round()
    advance(100)
    set("BTC", 3)
    set("ETH", 30) // not held before: no spacing to wait for
    hub.round()
    advance(100)
    set("BTC", 4)
    hub.round()
    expect(a.events().slice(1).map((e) => [e.data.symbol, e.data.price])).toEqual([["BTC", 2], ["ETH", 30]])
    const b = open(["BTC", "ETH"])
    advance(49)
    hub.round()
    expect(a.events()).toHaveLength(3)
    advance(1)
    hub.round()
    for (const stream of [a, b]) {
      const events = stream.events()
      expect(events.at(-1)!.data).toMatchObject({ symbol: "BTC", price: 4 })
      for (let i = 1; i < events.length; i++) expect(events[i]!.id).toBeGreaterThan(events[i - 1]!.id)
    }
    // The snapshot the joining stream got held BTC at 2 (what the group had sent), then BTC 4 as an event.
    expect(b.events().map((e) => e.data.price ?? e.data.prices.map((p: { price: number }) => p.price))).toEqual([[2, 30], 4])
  })

  it("sends a comment after the heartbeat's silence, not before", () => {
    const { advance, hub, open } = setup()
    const s = open(["BTC"])
    advance(999)
    hub.round()
    expect(s.chunks.filter((c) => c === ":\n\n")).toHaveLength(0)
    advance(1)
    hub.round()
    expect(s.chunks.filter((c) => c === ":\n\n")).toHaveLength(1)
  })

  it("closes a stream whose reader lags past the bound, and no other", () => {
    const { hub, open, set } = setup({ maxBufferedBytes: 100 })
    const slow = open(["BTC"], "a", fakeSink(() => 101))
    const fast = open(["BTC"], "b")
    set("BTC", 7)
    hub.round()
    expect(slow.state.destroyed).toBe(true)
    expect(fast.state.destroyed).toBe(false)
    expect(hub.stats().open).toBe(1)
  })

  it("refuses beyond the address's and the process's limits, and frees a place when a stream closes", () => {
    const { hub, open } = setup({ maxPerAddress: 1, maxStreams: 2 })
    const first = open(["BTC"], "a")
    expect(open(["BTC"], "a").refused()).toMatchObject({ code: "rate_limited" })
    open(["BTC"], "b")
    expect(open(["BTC"], "c").refused()).toMatchObject({ code: "service_unavailable" })
    first.close()
    expect(open(["BTC"], "a").refused()).toBeUndefined()
    expect(open(["FOO"], "d").refused()).toMatchObject({ code: "service_unavailable" })
    expect(hub.stats().open).toBe(2)
  })

  it("refuses no valid symbol; ends every stream when draining and opens none", () => {
    const { hub, open } = setup()
    expect(open(["FOO"]).refused()).toEqual({ code: "no_valid_symbols", unknown: ["FOO"] })
    const s = open(["BTC"])
    hub.endAll()
    expect(s.state.ended).toBe(true)
    expect(open(["BTC"]).refused()).toMatchObject({ code: "service_unavailable", retryAfter: 1 })
    expect(hub.stats()).toMatchObject({ open: 0, groups: 0, currencies: 0 })
  })
})
