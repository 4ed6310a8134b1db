/**
 * Issue 14, finding 9, over real HTTP: on a keep-alive connection, a request with a chunked body the
 * service does not read (a HEAD's, or one refused before or while it is read) followed at once by
 * the next request: the next one was lost (`socket hang up` / ECONNRESET in Node's keep-alive Agent).
 *
 * Where: the HttpApi's platform (NodeHttpServer's teardownBody) drains an unread body only to 256 KiB
 * and then closes the connection, after a response that said `keep-alive`; the Agent had already
 * sent the next request on it. The edge now announces `Connection: close` for a chunked body until
 * it has been read, so the Agent opens a new connection instead.
 */
import { Agent, request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "../../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

interface Answer {
  readonly status: number | string
  readonly connection: string | undefined
  readonly socketId: number
}

const socketIds = new WeakMap<object, number>()
let nextSocketId = 0

/** One request on `agent`; a chunked body (`body`, or `bodyBytes` of filler) when given. */
const call = (
  agent: Agent,
  method: string,
  path: string,
  options: { bodyBytes?: number; body?: string; headers?: Record<string, string> } = {}
) =>
  new Promise<Answer>((resolve) => {
    const chunked = options.bodyBytes !== undefined || options.body !== undefined
    const headers = { ...options.headers, ...(chunked ? { "transfer-encoding": "chunked" } : {}) }
    const req = request(`${app.url}${path}`, { method, agent, headers }, (res) => {
      res.resume()
      res.on("end", () =>
        resolve({ status: res.statusCode!, connection: res.headers.connection, socketId: socketIds.get(res.socket) ?? -1 }))
    })
    req.on("socket", (socket) => {
      if (!socketIds.has(socket)) socketIds.set(socket, nextSocketId++)
    })
    req.on("error", (error: NodeJS.ErrnoException) => resolve({ status: error.code ?? error.message, connection: undefined, socketId: -1 }))
    if (options.bodyBytes !== undefined) {
      const chunk = Buffer.alloc(64 * 1024, "x")
      for (let sent = 0; sent < options.bodyBytes; sent += chunk.length) req.write(chunk)
    }
    if (options.body !== undefined) {
      req.write(options.body.slice(0, 10))
      req.write(options.body.slice(10))
    }
    req.end()
  })

const twoMiB = 2 * 1024 * 1024

/** The request with an unread chunked body, then at once GET /api/health on the same Agent (one socket). */
const thenHealth = async (method: string, path: string, headers?: Record<string, string>) => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  try {
    const first = call(agent, method, path, { bodyBytes: twoMiB, ...(headers === undefined ? {} : { headers }) })
    const second = call(agent, "GET", "/api/health")
    return { first: await first, second: await second }
  } finally {
    agent.destroy()
  }
}

describe("a chunked body left unread, then the next request on the keep-alive connection", () => {
  it("HEAD /api/health: both answered", async () => {
    const { first, second } = await thenHealth("HEAD", "/api/health")
    expect([first.status, second.status]).toEqual([200, 200])
    expect(first.connection).toBe("close")
  })

  it("a 405: both answered", async () => {
    const { first, second } = await thenHealth("DELETE", "/api/health")
    expect([first.status, second.status]).toEqual([405, 200])
  })

  it("a 413 (the body is too large for the operation): both answered", async () => {
    const { first, second } = await thenHealth("POST", "/api/v1/exchange-rates", { "content-type": "application/json" })
    expect([first.status, second.status]).toEqual([413, 200])
  })

  it("a 415 (refused before the body is read): both answered", async () => {
    const { first, second } = await thenHealth("POST", "/api/v1/exchange-rates", { "content-type": "text/plain" })
    expect([first.status, second.status]).toEqual([415, 200])
  })

  it("a chunked body read to its end keeps the connection alive: the next request uses the same socket", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const body = JSON.stringify({ email: "chunked@example.com", locale: "en" })
      const first = call(agent, "POST", "/api/subscribe", { body, headers: { "content-type": "application/json" } })
      const second = call(agent, "GET", "/api/health")
      expect(await first).toMatchObject({ status: 200, connection: "keep-alive" })
      expect((await second).status).toBe(200)
      expect((await second).socketId).toBe((await first).socketId)
    } finally {
      agent.destroy()
    }
  })
})
