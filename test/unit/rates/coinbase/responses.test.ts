/**
 * Reading Coinbase's answers (no I/O): prices as decimal strings only, error bodies, an HTML 404 told
 * apart from a missing product; candles with prices that are not positive refused; and the candle
 * arithmetic: 300-day windows, off-midnight stamps refused, closed days judged by Coinbase's time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Headers } from "effect/http"
import { asMidnightPoints, coinbaseNow, dailyCloses, dayWindows } from "../../../../src/rates/coinbase/candles.ts"
import { decodeCandles, decodeProducts, decodeStats, decodeTicker, errorMessage } from "../../../../src/rates/coinbase/responses.ts"
import { DAY_MS } from "../../../../src/rates/dailySeries.ts"
import { type Decoder, interpretResponse } from "../../../../src/rates/upstreamCall.ts"

/** Coinbase's reading of an answer, as its client reads it (a 429's window is 2 s here). */
const reading = { source: "coinbase" as const, errorMessage, keyed: false, rateLimitedSeconds: () => 2 }
const interpret = <A>(what: string, raw: { readonly status: number; readonly body: string }, decode: Decoder<A>) =>
  interpretResponse(reading, what, { ...raw, headers: Headers.empty, receivedAt: 0 }, decode)
const read = <A>(status: number, body: string, decode: Decoder<A>) => Effect.flip(interpret("call", { status, body }, decode))

describe("reading Coinbase's answers", () => {
  it.effect("a price must be a decimal string: numbers, exponents, blanks and zero are wrong shapes", () =>
    Effect.gen(function*() {
      for (const price of [64250.12, "6.4e4", "", " 1", "NaN", "0", "-3"]) {
        const error = yield* read(200, JSON.stringify({ price, time: "2026-11-22T10:00:00.000123Z" }), decodeTicker)
        assert.strictEqual(error.kind, "invalid-response", String(price))
      }
      assert.strictEqual((yield* read(200, JSON.stringify({ price: "1.5", time: "yesterday" }), decodeTicker)).kind, "invalid-response")
      const ticker = yield* interpret("ticker", { status: 200, body: "{\"price\":\"64250.12\",\"time\":\"2026-11-22T10:00:00.000123Z\"}" }, decodeTicker)
      assert.deepStrictEqual(ticker, { price: 64250.12, time: Date.UTC(2026, 10, 22, 10) })
      assert.deepStrictEqual(yield* interpret("stats", { status: 200, body: "{\"open\":\"2\",\"last\":\"2.5\",\"volume\":\"1\"}" }, decodeStats), { open: 2, last: 2.5 })
    }))

  it.effect("candles are six numbers; products must name their pair", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* read(200, "[[1,2,3,4,\"5\",6]]", decodeCandles)).kind, "invalid-response")
      assert.strictEqual((yield* read(200, "[[1,2,3,4,5]]", decodeCandles)).kind, "invalid-response")
      assert.strictEqual((yield* read(200, "[{\"id\":\"BTC-USD\",\"status\":\"online\"}]", decodeProducts)).kind, "invalid-response")
    }))

  it.effect("a candle's prices must be positive and its volume zero or more, as a ticker's price: else the answer is invalid", () =>
    Effect.gen(function*() {
      const good = [1_795_132_800, 1, 3, 2, 2.5, 10]
      for (const [at, value] of [[1, 0], [2, -3], [3, 0], [4, -0.5], [5, -1]] as const) {
        const candle = good.map((v, i) => (i === at ? value : v))
        const outcome = yield* Effect.result(interpret("candles", { status: 200, body: JSON.stringify([good, candle]) }, decodeCandles))
        assert.strictEqual(outcome._tag === "Failure" ? outcome.failure.kind : "accepted", "invalid-response", JSON.stringify(candle))
      }
      const quiet = [1_795_132_800, 1, 3, 2, 2.5, 0] as const
      assert.deepStrictEqual(yield* interpret("candles", { status: 200, body: JSON.stringify([quiet]) }, decodeCandles), [quiet])
    }))

  it.effect("statuses: 404 {message} is not-found, an HTML 404 a rejected request, 5xx transient, 429 rate-limited", () =>
    Effect.gen(function*() {
      assert.deepInclude(yield* read(404, "{\"message\":\"NotFound\"}", decodeStats), { kind: "not-found", detail: "call: 404 (NotFound)" })
      assert.strictEqual((yield* read(404, "<html>Not Found</html>", decodeStats)).kind, "rejected")
      assert.strictEqual((yield* read(400, "{\"message\":\"Unsupported granularity\"}", decodeCandles)).kind, "rejected")
      assert.strictEqual((yield* read(502, "<html>Bad gateway</html>", decodeStats)).kind, "transient")
      assert.deepInclude(yield* read(429, "{\"message\":\"Public rate limit exceeded\"}", decodeStats), { kind: "rate-limited", retryAfterSeconds: 2 })
    }))
})

describe("candle arithmetic", () => {
  it("cuts a range into windows of at most 300 days, both ends included", () => {
    const day = (k: number) => k * DAY_MS
    assert.deepStrictEqual(dayWindows(day(0), day(299)), [[day(0), day(299)]])
    assert.deepStrictEqual(dayWindows(day(0), day(300)), [[day(0), day(299)], [day(300), day(300)]])
    assert.deepStrictEqual(dayWindows(day(10), day(9)), [])
  })

  it("keeps the days asked for, oldest first; refuses a candle off midnight; restamps closed days only", () => {
    const candle = (day: number, close: number) => [day / 1000, close, close, close, close, 1] as const
    const { closes } = dailyCloses([candle(3 * DAY_MS, 3), candle(2 * DAY_MS, 2), candle(DAY_MS, 1)], 2 * DAY_MS, 3 * DAY_MS)
    assert.deepStrictEqual(closes, [[2 * DAY_MS, 2], [3 * DAY_MS, 3]])
    assert.strictEqual(dailyCloses([candle(DAY_MS + 3_600_000, 1)], 0, 2 * DAY_MS).offMidnight, DAY_MS + 3_600_000)
    assert.deepStrictEqual(asMidnightPoints(closes, 3 * DAY_MS + 5), [[3 * DAY_MS, 2]])
  })

  it("Coinbase's time: its latest Date header; lacking one, its newest candle's start (today's, still moving)", () => {
    const candle = (day: number) => [day / 1000, 1, 1, 1, 1, 1] as const
    const candles = [candle(3 * DAY_MS), candle(2 * DAY_MS)]
    assert.strictEqual(coinbaseNow([3 * DAY_MS + 5, 3 * DAY_MS + 9], candles), 3 * DAY_MS + 9)
    assert.strictEqual(coinbaseNow([], candles), 3 * DAY_MS)
    const { closes } = dailyCloses(candles, 0, 3 * DAY_MS)
    assert.deepStrictEqual(asMidnightPoints(closes, coinbaseNow([], candles)), [[3 * DAY_MS, 1]], "the newest candle is no close")
  })
})
