/**
 * The fast lane (src/http/fastLane.ts) against the Effect path it stands in for: same answers (status,
 * headers, bytes), one rate-limit count shared by both lanes, the same access-log lines, and only
 * answers it may give: fresh, anonymous, plain requests. Everything else reaches HttpApi intact,
 * including a body the lane read first.
 */
import { randomUUID } from "node:crypto"
import { request } from "node:http"
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Layer, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../emulators/coingecko.ts"
import { RequestCounterRedis } from "../../src/http/rateLimit.ts"
import * as CoinGeckoRates from "../../src/rates/CoinGeckoRates.ts"
import { RedisLive } from "../../src/redis.ts"
import { RatesProvider } from "../../src/rates/RatesProvider.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { expectProblem } from "../support/problems.ts"

const NOW = Date.UTC(2026, 10, 22, 10, 30)
let emulator: CoinGeckoEmulator

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
})
afterAll(() => emulator.close())

/** The live CoinGecko provider, counting how often HttpApi's handler asks it. */
const countingRates = (env: Record<string, string> = {}) => {
  const calls = { historical: 0 }
  const layer = Layer.effect(
    RatesProvider,
    Effect.map(RatesProvider, (inner) =>
      RatesProvider.of({
        ...inner,
        historical: (query) => Effect.suspend(() => (calls.historical++, inner.historical(query)))
      }))
  ).pipe(Layer.provide(CoinGeckoRates.layerFrom({ COINGECKO_BASE_URL: emulator.url, ...env })), Layer.provide(NodeHttpClient.layerUndici))
  return { layer, calls }
}

const post = (app: TestApp, body: string, headers: Record<string, string> = { "content-type": "application/json" }) =>
  fetch(`${app.url}/api/v1/exchange-rates`, { method: "POST", headers, body })

/** Response headers without the per-request ones, in wire order. */
const stableHeaders = (res: Response, alsoVarying: ReadonlyArray<string> = []) =>
  [...res.headers].filter(([name]) => ![...alsoVarying, "date", "x-request-id", "ratelimit", "keep-alive", "connection"].includes(name))

const QUERY = JSON.stringify({ cryptos: ["BTC", "ETH", "SOL"], days: 30 })

describe("fast lane: health", () => {
  let fast: TestApp
  let slow: TestApp
  beforeAll(async () => {
    fast = await startTestApp({ env: { APP_ENV: "staging" } })
    slow = await startTestApp({ env: { APP_ENV: "staging" }, fastLane: false })
  })
  afterAll(async () => {
    await fast.close()
    await slow.close()
  })

  it("answers GET and HEAD with the Effect path's status, headers and body shape", async () => {
    for (const method of ["GET", "HEAD"]) {
      const [a, b] = await Promise.all([fast, slow].map((app) => fetch(`${app.url}/api/health`, { method })))
      expect(a!.status).toBe(200)
      // The length follows the digits of `uptime`: compared with the body below.
      expect(stableHeaders(a!, ["content-length"])).toEqual(stableHeaders(b!, ["content-length"]))
      expect([...a!.headers].map(([name]) => name)).toEqual([...b!.headers].map(([name]) => name))
      expect(a!.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
      expect(a!.headers.get("ratelimit")).toMatch(/^"health";r=\d+;t=\d+$/)
      if (method === "GET") {
        const text = await a!.text()
        expect(Buffer.byteLength(text)).toBe(Number(a!.headers.get("content-length")))
        const [x, y] = [JSON.parse(text), await b!.json()]
        expect(Object.keys(x)).toEqual(Object.keys(y))
        expect(x).toMatchObject({ status: "healthy", environment: "staging" })
        expect(Date.parse(x.timestamp)).toBeGreaterThan(Date.now() - 5_000)
        expect(x.uptime).toBeGreaterThanOrEqual(0)
      } else expect(await a!.text()).toBe("")
    }
    const logged = fast.logs.filter((l) => l.path === "/api/health")
    expect(logged.map((l) => [l.method, l.status])).toEqual([["GET", 200], ["HEAD", 200]])
    expect(logged[0]).toMatchObject({ clientIp: "127.0.0.1", requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) })
    expect(Object.keys(logged[0]!).sort()).toEqual(Object.keys(slow.logs.find((l) => l.path === "/api/health")!).sort())
  })

  it("echoes a UUID X-Request-Id as the Effect path does", async () => {
    const id = "0f8fad5b-d9cb-469f-a165-70867728950e"
    const res = await fetch(`${fast.url}/api/health`, { headers: { "x-request-id": id.toUpperCase() } })
    expect(res.headers.get("x-request-id")).toBe(id)
    expect(fast.logs.at(-1)?.requestId).toBe(id)
  })
})

describe("fast lane: rate limits", () => {
  it("counts in the same store as the Effect path and answers the same 429", async () => {
    const app = await startTestApp({ env: { RATE_LIMIT_HEALTH_PER_MIN: "3" } })
    try {
      // The query string makes the lane hand the request over (it serves the exact path only).
      const viaLane = () => fetch(`${app.url}/api/health`)
      const viaEffect = () => fetch(`${app.url}/api/health?via=effect`)
      const remaining = []
      for (const call of [viaLane, viaEffect, viaLane]) {
        const res = await call()
        expect(res.status).toBe(200)
        remaining.push(res.headers.get("ratelimit"))
      }
      expect(remaining.map((r) => r?.match(/r=(\d+)/)?.[1])).toEqual(["2", "1", "0"])
      const fromLane = await viaLane()
      const fromEffect = await viaEffect()
      const a = await expectProblem(fromLane, 429, "rate_limited")
      const b = await expectProblem(fromEffect, 429, "rate_limited")
      expect(stableHeaders(fromLane)).toEqual(stableHeaders(fromEffect))
      expect(fromLane.headers.get("ratelimit")).toMatch(/^"health";r=0;t=\d+$/)
      expect({ ...a, instance: undefined }).toEqual({ ...b, instance: undefined })
      expect(app.logs.slice(-2).map((l) => l.status)).toEqual([429, 429])
    } finally {
      await app.close()
    }
  })
})

describe("fast lane: rate limits in Redis", () => {
  const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
  it("counts through the shared store, one count with an instance that has no lane", async () => {
    const env = { RATE_LIMIT_HEALTH_PER_MIN: "3", REDIS_KEY_PREFIX: `test-${randomUUID()}:` }
    const counter = RequestCounterRedis.pipe(Layer.provide(RedisLive(Redacted.make(redisUrl))))
    const [laneApp, effectApp] = await Promise.all([
      startTestApp({ env, counter }),
      startTestApp({ env, counter, fastLane: false })
    ])
    try {
      const statuses = []
      for (const app of [laneApp, effectApp, laneApp, effectApp, laneApp]) {
        const res = await fetch(`${app.url}/api/health`)
        statuses.push([res.status, res.headers.get("ratelimit")?.match(/r=(\d+)/)?.[1]])
      }
      expect(statuses).toEqual([[200, "2"], [200, "1"], [200, "0"], [429, "0"], [429, "0"]])
      await expectProblem(await fetch(`${laneApp.url}/api/health`), 429, "rate_limited")
    } finally {
      await laneApp.close()
      await effectApp.close()
    }
  })
})

describe("fast lane: exchange rates", () => {
  it("answers a repeated query byte for byte as HttpApi did, without asking the provider again", async () => {
    const rates = countingRates()
    const app = await startTestApp({ rates: rates.layer })
    try {
      const first = await post(app, QUERY)
      expect(first.status).toBe(200)
      const firstBody = await first.text()
      expect(rates.calls.historical).toBe(1)
      // The same query spelled differently: case, duplicates, extra members, member order.
      const spellings = [
        QUERY,
        JSON.stringify({ days: 30, cryptos: ["btc", "ETH", "sol", "BTC"], note: "ignored" }),
        JSON.stringify({ cryptos: ["BTC", "ETH", "SOL"], currency: "USD" })
      ]
      for (const body of spellings) {
        const res = await post(app, body)
        expect(res.status).toBe(200)
        expect(stableHeaders(res)).toEqual(stableHeaders(first))
        expect(await res.text()).toBe(firstBody)
      }
      expect(rates.calls.historical).toBe(1)
      expect(app.logs.filter((l) => l.path === "/api/v1/exchange-rates").map((l) => l.status)).toEqual([200, 200, 200, 200])
    } finally {
      await app.close()
    }
  })

  it("hands everything else to HttpApi with the body intact", async () => {
    const rates = countingRates()
    const app = await startTestApp({ rates: rates.layer })
    try {
      expect((await post(app, QUERY)).status).toBe(200) // remembered from here on
      const before = rates.calls.historical
      await expectProblem(await post(app, `{"cryptos":["BTC"`), 400, "malformed_json")
      const invalid = await expectProblem(await post(app, JSON.stringify({ cryptos: [] })), 400, "validation_failed")
      expect(invalid.errors).toEqual([expect.objectContaining({ pointer: "/cryptos" })])
      await expectProblem(await post(app, JSON.stringify({ cryptos: ["BTC"], days: 0 })), 400, "validation_failed")
      await expectProblem(await post(app, QUERY, { "content-type": "text/plain" }), 415, "unsupported_media_type")
      expect(rates.calls.historical).toBe(before) // none of those reached the provider

      // Not remembered yet: the lane reads the body, puts it back, and HttpApi answers it.
      expect((await post(app, JSON.stringify({ cryptos: ["DOGE"], days: 7 }))).status).toBe(200)
      expect(rates.calls.historical).toBe(before + 1)
      // Remembered, but too large for the lane (padding past 4 KiB), chunked, or from a browser: HttpApi.
      const padded = JSON.stringify({ cryptos: ["BTC", "ETH", "SOL"], days: 30, pad: "x".repeat(5_000) })
      expect((await post(app, padded)).status).toBe(200)
      expect(await chunkedPost(app, QUERY)).toBe(200)
      const cors = await post(app, QUERY, { "content-type": "application/json", origin: "https://app.example" })
      expect(cors.status).toBe(200)
      expect(cors.headers.get("access-control-allow-origin")).toBe("*")
      expect(rates.calls.historical).toBe(before + 4)
    } finally {
      await app.close()
    }
  })

  it("stops answering once something behind the answer expires, and never serves an old copy", async () => {
    const rates = countingRates({ COINGECKO_LATEST_TTL_S: "1" })
    const app = await startTestApp({ rates: rates.layer })
    try {
      const body = JSON.stringify({ cryptos: ["ADA"], days: 5 })
      expect((await (await post(app, body)).json()).stale).toBe(false)
      await post(app, body)
      expect(rates.calls.historical).toBe(1)
      await new Promise((resolve) => setTimeout(resolve, 1_100)) // the latest price expired
      expect((await (await post(app, body)).json()).stale).toBe(false)
      expect(rates.calls.historical).toBe(2)

      emulator.setFault("5xx")
      await new Promise((resolve) => setTimeout(resolve, 1_100))
      for (let i = 0; i < 3; i++) expect((await (await post(app, body)).json()).stale).toBe(true)
      // Each stale answer came from the provider, which retried the upstream each time.
      expect(rates.calls.historical).toBe(5)
    } finally {
      emulator.setFault("none")
      await app.close()
    }
  })
})

/** A POST with `Transfer-Encoding: chunked` (fetch always sends a length for a string body). */
const chunkedPost = (app: TestApp, body: string) =>
  new Promise<number>((resolve, reject) => {
    const req = request(`${app.url}/api/v1/exchange-rates`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode ?? 0))
    })
    req.on("error", reject)
    req.write(body.slice(0, 10))
    req.end(body.slice(10))
  })
