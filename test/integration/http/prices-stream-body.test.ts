/**
 * A price stream asked with a request body (a GET's body means nothing: RFC 9110 §9.3.1): the request ends with its
 * body, unread, so the server's request timeout (here 1 s) does not cut the stream. (A client that announces a body
 * and never sends it is cut at the timeout, as on every path: its request never ended.)
 */
import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RatesProvider } from "../../../src/rates/RatesProvider.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"

const REQUEST_TIMEOUT_MS = 1_000
const HEARTBEAT_MS = 100

describe("a price stream asked with a body", () => {
  let app: TestApp
  beforeAll(async () => {
    app = await startTestApp({
      rates: RatesProvider.layerTest,
      limits: { requestTimeout: `${REQUEST_TIMEOUT_MS} millis`, headersTimeout: `${REQUEST_TIMEOUT_MS} millis`, checkInterval: "200 millis" },
      priceHub: { heartbeatMs: HEARTBEAT_MS }
    })
  })
  afterAll(() => app?.close())

  it("keeps streaming past the request timeout", async () => {
    const { port } = new URL(app.url)
    const socket = connect(Number(port), "127.0.0.1")
    const body = "ignored"
    socket.write(`GET /api/v1/prices/stream?cryptos=BTC HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${body.length}\r\n\r\n${body}`)
    let text = ""
    let closedAt: number | undefined
    const openedAt = Date.now()
    socket.on("data", (chunk) => (text += chunk.toString()))
    socket.on("close", () => (closedAt = Date.now()))
    // Heartbeats every 100 ms: wait until the stream has run three request timeouts, or ended.
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (closedAt !== undefined || Date.now() - openedAt > 3 * REQUEST_TIMEOUT_MS) {
          clearInterval(check)
          resolve()
        }
      }, 50)
    })
    socket.destroy()
    expect(text).toMatch(/^HTTP\/1\.1 200 /)
    expect(text).toContain("event: snapshot")
    expect(closedAt, "the stream was cut").toBeUndefined()
    const lastHeartbeats = text.slice(text.lastIndexOf("event: snapshot")).split("\n:\n").length - 1
    expect(lastHeartbeats).toBeGreaterThan(5)
  })
})
