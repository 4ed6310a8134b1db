/**
 * A price stream whose reader does not read (C10, docs/prices.md "How it works"): the real server over real sockets, its
 * prices from a fake that changes all 50 symbols at every read, its rounds shortened to 10 ms so that the kernel's
 * socket buffers (megabytes on loopback) fill in seconds. Once the unread bytes Node holds pass the bound (production's
 * 64 KiB) the stream is closed and counted in `live_streams_closed_lagging_total`, while a stream that reads, on the
 * same process, keeps getting every round's prices on time.
 */
import { connect, type Socket } from "node:net"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type HeldPrice, RatesProvider } from "../../../src/rates/RatesProvider.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { freePort } from "../../support/spawn.ts"
import { openStream, waitFor } from "../e2e/prices-stream-support.ts"

const SYMBOLS = Array.from({ length: 50 }, (_, i) => `C${i}`)
const ROUND_MS = 10

/** Every read: every symbol's price moved, observed now. */
let reads = 0
const movingPrices = Layer.succeed(RatesProvider)({
  historical: () => Effect.die("not asked: the price stream reads latestPrices only"),
  latestPrices: (query) =>
    Effect.sync(() => {
      reads++
      const at = Date.now()
      return { prices: new Map(query.symbols.map((symbol, i) => [symbol, { price: reads + i / 100, change24h: null, at, source: "coinbase" } satisfies HeldPrice] as const)), unknown: [] }
    })
})

describe("a reader that does not read", () => {
  let app: TestApp
  let metricsPort: number
  const metric = async (name: string) => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
    return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? 0)
  }

  beforeAll(async () => {
    metricsPort = await freePort()
    app = await startTestApp({ rates: movingPrices, env: { METRICS_PORT: String(metricsPort) }, priceHub: { roundMs: ROUND_MS } })
  })
  afterAll(() => app?.close())

  it("exports the streams' series at zero before any stream opens (rates and alerts work from the start)", async () => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
    for (const name of ["live_streams_open", "live_stream_events_total", "live_streams_closed_lagging_total"]) {
      expect(text).toMatch(new RegExp(`^${name}(?:\\{[^}]*\\})? 0$`, "m"))
    }
  })

  it("is closed once its unread bytes pass the bound, counted, while another stream keeps getting events on time", async () => {
    const laggingBefore = await metric("live_streams_closed_lagging_total")
    const query = `cryptos=${SYMBOLS.join(",")}`
    const reader = await openStream(`${app.url}/api/v1/prices/stream?${query}`)
    expect(reader.status).toBe(200)

    // The stalled reader: the request sent, its socket never read until the service has given up on it.
    const stalled: Socket = connect({ host: "127.0.0.1", port: Number(new URL(app.url).port) })
    stalled.pause()
    let stalledClosed = false
    stalled.on("close", () => {
      stalledClosed = true
    })
    stalled.on("error", () => undefined)
    stalled.write(`GET /api/v1/prices/stream?${query} HTTP/1.1\r\nHost: x\r\n\r\n`)
    const stalledAt = Date.now()
    try {
      await waitFor("the stalled stream closed for lagging", async () => (await metric("live_streams_closed_lagging_total")) > laggingBefore, 60_000)
      const closedAfterMs = Date.now() - stalledAt
      expect(await metric("live_streams_closed_lagging_total")).toBe(laggingBefore + 1)
      // Its socket is gone: read what the kernel held, then the end.
      stalled.resume()
      await waitFor("the stalled socket's end", () => stalledClosed, 20_000)

      // The reader got its events all along: every symbol in every stretch, none late, and still gets them.
      const prices = reader.events.filter((e) => e.event === "price").map((e) => ({ receivedAt: e.receivedAt, at: Date.parse((JSON.parse(e.data) as { at: string }).at) }))
      expect(prices.length, `events while the other stalled for ${closedAfterMs} ms`).toBeGreaterThan(SYMBOLS.length * 10)
      const late = prices.filter((p) => p.receivedAt - p.at > 2_000)
      expect(late.length, `events received more than 2 s after their read (worst ${Math.max(...prices.map((p) => p.receivedAt - p.at))} ms)`).toBe(0)
      const gaps = prices.slice(1).map((p, i) => p.receivedAt - prices[i]!.receivedAt)
      expect(Math.max(...gaps), "the longest wait between two of the reader's events").toBeLessThan(2_000)
      const count = reader.events.length
      await waitFor("more events after the close", () => reader.events.length > count + SYMBOLS.length, 10_000)
      expect(await metric("live_streams_open")).toBe(1)
    } finally {
      stalled.destroy()
      reader.close()
    }
  }, 120_000)
})
