/**
 * The ready answer of POST /api/v1/exchange-rates: a remembered body for a payload (decoded by the edge
 * as the HttpApi decodes it), normalised as the handler normalises it; undefined for anything else.
 * Over HTTP, a request the HttpApi would refuse never gets a remembered answer.
 */
import { assert, describe, it } from "@effect/vitest"
import * as http from "node:http"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { RatesAnswerMemo } from "../../../src/rates/answer.ts"
import { RatesDemand } from "../../../src/rates/coingecko/latestPrices.ts"
import { ratesReadyAnswer } from "../../../src/rates/handlers.ts"
import type { RatesResult } from "../../../src/rates/RatesProvider.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { countingRatesProvider } from "../../support/rates.ts"

const NOW = Date.UTC(2026, 10, 22, 10, 0, 0)
const body = new TextEncoder().encode("{\"remembered\":true}")
const memoAndDemand = Layer.merge(RatesAnswerMemo.layer, RatesDemand.layer)

/** The ready answer over a memo holding `body` for BTC, ETH in usd over 30 days, fresh for a minute. */
const setUp = Effect.gen(function*() {
  yield* TestClock.setTime(NOW)
  const memo = yield* RatesAnswerMemo
  memo.remember({ symbols: ["BTC", "ETH"], currency: "usd", days: 30 }, { result: {} as RatesResult, freshUntil: NOW + 60_000, body })
  return yield* ratesReadyAnswer
})

describe("ratesReadyAnswer", () => {
  it.effect("answers getHistoricalExchangeRates", () =>
    Effect.gen(function*() {
      const ready = yield* setUp
      assert.strictEqual(ready.operationId, "getHistoricalExchangeRates")
      assert.strictEqual(ready.answer({ cryptos: ["BTC", "ETH"], currency: "usd", days: 30 }), body)
    }).pipe(Effect.provide(memoAndDemand)))

  it.effect("normalises as the handler does: case, duplicates, defaults; ignores extra members", () =>
    Effect.gen(function*() {
      const ready = yield* setUp
      for (
        const request of [
          { cryptos: ["btc", "eth"] },
          { cryptos: ["Btc", "ETH", "BTC", "eth"], currency: "USD" },
          { cryptos: ["BTC", "ETH"], currency: "Usd", days: 30 },
          { cryptos: ["BTC", "ETH"], note: "extra members are allowed (and ignored)" }
        ]
      ) assert.strictEqual(ready.answer(request), body, JSON.stringify(request))
    }).pipe(Effect.provide(memoAndDemand)))

  it.effect("misses a query not remembered: other symbols, order, currency or days", () =>
    Effect.gen(function*() {
      const ready = yield* setUp
      for (
        const request of [
          { cryptos: ["BTC"] },
          { cryptos: ["ETH", "BTC"] },
          { cryptos: ["BTC", "ETH", "SOL"] },
          { cryptos: ["BTC", "ETH"], currency: "eur" },
          { cryptos: ["BTC", "ETH"], days: 7 }
        ]
      ) assert.isUndefined(ready.answer(request), JSON.stringify(request))
    }).pipe(Effect.provide(memoAndDemand)))

  it.effect("notes the caller of a repeat it answers (by its address, as the handler counts it), and of a miss nothing", () =>
    Effect.gen(function*() {
      const ready = yield* setUp
      const demand = yield* RatesDemand
      assert.strictEqual(ready.answer({ cryptos: ["BTC", "ETH"] }, "198.51.100.7"), body)
      assert.strictEqual(ready.answer({ cryptos: ["btc", "eth"], currency: "USD" }, "2001:db8::1"), body)
      assert.isUndefined(ready.answer({ cryptos: ["BTC"], currency: "eur" }, "198.51.100.8"))
      assert.deepStrictEqual(demand.weights(), { weights: new Map([["usd", 2]]), callers: 2 })
      assert.deepStrictEqual(demand.size(), { callers: 2, pairs: 2 })
    }).pipe(Effect.provide(memoAndDemand)))

  it.effect("misses once the remembered answer is past its freshness", () =>
    Effect.gen(function*() {
      const ready = yield* setUp
      yield* TestClock.adjust("1 minute")
      assert.isUndefined(ready.answer({ cryptos: ["BTC", "ETH"] }))
    }).pipe(Effect.provide(memoAndDemand)))
})

describe("an answer remembered is repeated by the edge, only while it holds", () => {
  const counting = countingRatesProvider
  /** A POST over `agent`'s kept-alive connections. */
  const postOn = (agent: http.Agent, app: TestApp, body: unknown) =>
    new Promise<{ readonly status: number; readonly body: string }>((resolve, reject) => {
      const request = http.request(`${app.url}/api/v1/exchange-rates`, { method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }))
        res.on("error", reject)
      })
      request.on("error", reject)
      request.end(JSON.stringify(body))
    })
  const post = (app: TestApp, body: unknown) =>
    fetch(`${app.url}/api/v1/exchange-rates`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

  it("a fresh answer: asked once, then answered from the memo with the same bytes", async () => {
    const rates = counting(() => Date.now() + 60_000)
    const app = await startTestApp({ rates: rates.layer })
    try {
      const first = await post(app, { cryptos: ["SOL", "BTC"], currency: "eur", days: 3 })
      assert.strictEqual(first.status, 200)
      const again = await post(app, { cryptos: ["sol", "btc", "SOL"], currency: "EUR", days: 3 })
      assert.strictEqual(again.status, 200)
      assert.strictEqual(await again.text(), await first.text())
      assert.strictEqual(rates.calls.historical, 1)
    } finally {
      await app.close()
    }
  })

  it("every request counts its caller, a repeat the edge answers from the memo as much as the first", async () => {
    const rates = counting(() => Date.now() + 60_000)
    const app = await startTestApp({ rates: rates.layer, env: { TRUST_PROXY: "true" } })
    try {
      for (const address of ["198.51.100.1", "198.51.100.2", "198.51.100.3"]) {
        const res = await fetch(`${app.url}/api/v1/exchange-rates`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-forwarded-for": address },
          body: JSON.stringify({ cryptos: ["BTC"], currency: "eur" })
        })
        assert.strictEqual(res.status, 200)
      }
      assert.strictEqual(rates.calls.historical, 1)
      // One demand for the edge and the use case: three callers, all in eur.
      assert.deepStrictEqual(rates.demand().weights(), { weights: new Map([["eur", 3]]), callers: 3 })
    } finally {
      await app.close()
    }
  })

  it("a request the HttpApi would refuse is refused, even when it names the remembered query", async () => {
    const rates = counting(() => Date.now() + 60_000)
    const app = await startTestApp({ rates: rates.layer })
    try {
      assert.strictEqual((await post(app, { cryptos: ["BTC", "ETH"] })).status, 200)
      assert.strictEqual((await post(app, { cryptos: ["btc", "eth"] })).status, 200)
      for (
        const request of [
          null,
          "BTC,ETH",
          [],
          {},
          { cryptos: "BTC" },
          { cryptos: ["BTC", "ETH"], days: "30" },
          { cryptos: ["BTC", "ETH"], days: 30.5 },
          { cryptos: ["BTC", "ETH"], currency: "usd " },
          { cryptos: ["BTC", "ETH", ""] },
          { cryptos: ["BTC", "ETH", 7] },
          { cryptos: [...Array.from({ length: 50 }, () => "BTC"), "ETH"] }
        ]
      ) {
        const res = await post(app, request)
        assert.strictEqual(res.status, 400, JSON.stringify(request))
        assert.strictEqual((await res.json()).code, "validation_failed", JSON.stringify(request))
      }
      assert.strictEqual(rates.calls.historical, 1)
    } finally {
      await app.close()
    }
  })

  it("an answer past its freshness is rebuilt by one request: the repeats arriving meanwhile get it as it was", async () => {
    // The first answer holds a second from when it is made, as a live answer does; each takes 50 ms to make.
    let until = Number.POSITIVE_INFINITY
    let made = 0
    const rates = counting(() => (made++ === 0 ? (until = Date.now() + 1_000) : Date.now() + 60_000), { delayMs: 50 })
    const app = await startTestApp({ rates: rates.layer })
    // Twenty connections opened first (by payloads refused: no answer made), so the repeats go out at once, not behind twenty handshakes.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 20 })
    try {
      const opened = await Promise.all(Array.from({ length: 20 }, () => postOn(agent, app, { cryptos: "BTC" })))
      assert.deepStrictEqual(opened.map((res) => res.status), Array(20).fill(400))
      assert.strictEqual(Object.values(agent.freeSockets).flat().length, 20)
      const first = await postOn(agent, app, { cryptos: ["BTC"] })
      assert.strictEqual(first.status, 200)
      assert.strictEqual(rates.calls.historical, 1)
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, until + 10 - Date.now())))
      // Twenty callers at once, just past its freshness (each on a connection of its own).
      const repeats = await Promise.all(Array.from({ length: 20 }, () => postOn(agent, app, { cryptos: ["BTC"] })))
      assert.deepStrictEqual(repeats.map((res) => res.status), Array(20).fill(200))
      for (const res of repeats) assert.strictEqual(res.body, first.body)
      // One rebuild (before: each of the twenty ran the use case); a slow machine may spread them past the grace.
      assert.isAtLeast(rates.calls.historical, 2)
      assert.isAtMost(rates.calls.historical, 4)
    } finally {
      agent.destroy()
      await app.close()
    }
  })

  it("an answer made of old copies (freshUntil 0), or a refusal, is asked for every time", async () => {
    const rates = counting(() => 0)
    const app = await startTestApp({ rates: rates.layer })
    try {
      for (let i = 0; i < 2; i++) assert.strictEqual((await post(app, { cryptos: ["ETH"] })).status, 200)
      assert.strictEqual(rates.calls.historical, 2)
      for (let i = 0; i < 2; i++) assert.strictEqual((await post(app, { cryptos: ["NOPE"] })).status, 400)
      assert.strictEqual(rates.calls.historical, 4)
    } finally {
      await app.close()
    }
  })
})
