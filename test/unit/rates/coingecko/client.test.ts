/**
 * The upstream client's reading of CoinGecko answers, with canned responses from a stand-in HttpClient
 * (a Layer swap): error shapes, Retry-After forms, key headers, and request parameters.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"
import { configFrom, type Env } from "../../../support/config.ts"
import { CoinGeckoClient } from "../../../../src/rates/coingecko/CoinGeckoClient.ts"
import { CoinGeckoConfig } from "../../../../src/rates/coingecko/CoinGeckoConfig.ts"
import { Charge, type SourceError, spendingUntil } from "../../../../src/rates/upstream.ts"
import { layerGuardStoresMemory } from "../../../../src/rates/upstreamCall.ts"
import { MonthlyBudget } from "../../../../src/rates/coingecko/credits/MonthlyBudget.ts"

interface Seen {
  readonly url: URL
  readonly headers: Readonly<Record<string, string>>
}

/** A client whose upstream always answers `respond()`, recording every request it sees. */
const clientAnswering = (respond: () => Response, env: Env = {}) => {
  const seen: Array<Seen> = []
  const http = HttpClient.make((request, url) =>
    Effect.sync(() => {
      seen.push({ url, headers: request.headers })
      return HttpClientResponse.fromWeb(request, respond())
    }))
  const layer = CoinGeckoClient.layerNoDeps.pipe(
    Layer.provide(Layer.mergeAll(
      CoinGeckoConfig.layer.pipe(Layer.provide(configFrom({ COINGECKO_BASE_URL: "http://upstream.test/api/v3", COINGECKO_RETRY_BASE_MS: "1", ...env }))),
      layerGuardStoresMemory,
      // Credits out of the way: these tests are about the minute's budget, faults and the breaker.
      MonthlyBudget.layerMemory(1_000_000_000),
      Layer.succeed(HttpClient.HttpClient)(http)
    ))
  )
  return { layer, seen }
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) => () =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })
const html = (status: number) => () => new Response("<html><body>Oops</body></html>", { status, headers: { "content-type": "text/html" } })

/** A day's range, in UNIX seconds, for the chart calls. */
const FROM_S = 1_795_305_600
const TO_S = FROM_S + 86_400

const chartError = (respond: () => Response, env?: Env) => {
  const { layer, seen } = clientAnswering(respond, env)
  return Effect.gen(function*() {
    const client = yield* CoinGeckoClient
    const error: SourceError = yield* Effect.flip(client.marketChartRange("bitcoin", "usd", FROM_S, TO_S).pipe(spendingUntil(Number.POSITIVE_INFINITY, Charge.request(undefined))))
    return { error, calls: seen.length }
  }).pipe(Effect.provide(layer))
}

describe("CoinGeckoClient reading upstream errors", () => {
  it.live("404 {error: 'coin not found'} means the coin does not exist", () =>
    Effect.gen(function*() {
      const { calls, error } = yield* chartError(json(404, { error: "coin not found" }))
      assert.strictEqual(error.kind, "not-found")
      assert.include(error.detail, "coin not found")
      assert.strictEqual(calls, 1)
    }))

  it.live("an HTML 404 is a misconfigured upstream, not a missing coin", () =>
    Effect.gen(function*() {
      const { error } = yield* chartError(html(404))
      assert.strictEqual(error.kind, "rejected")
      assert.include(error.detail, "HTML page")
    }))

  it.live("reads {error: {status: {...}}} (the 365-day limit: the plan's, not a refused key) and does not retry a 4xx", () =>
    Effect.gen(function*() {
      const { calls, error } = yield* chartError(json(401, {
        error: { status: { timestamp: "2026-11-22T10:00:00Z", error_code: 10012, error_message: "Your request exceeds the allowed time range." } }
      }))
      assert.strictEqual(error.kind, "beyond-plan")
      assert.include(error.detail, "code 10012: Your request exceeds the allowed time range.")
      assert.strictEqual(calls, 1)
    }))

  it.live("reads {status: {...}} and retries a 5xx (GET is idempotent)", () =>
    Effect.gen(function*() {
      const { calls, error } = yield* chartError(json(500, { status: { error_code: 500, error_message: "Internal" } }), { COINGECKO_RETRIES: "2" })
      assert.strictEqual(error.kind, "transient")
      assert.include(error.detail, "code 500: Internal")
      assert.strictEqual(calls, 3)
    }))

  it.live("an HTML 503 is transient too", () =>
    Effect.gen(function*() {
      const { error } = yield* chartError(html(503), { COINGECKO_RETRIES: "0" })
      assert.strictEqual(error.kind, "transient")
      assert.include(error.detail, "503 (an HTML page)")
    }))

  it.live("429 takes Retry-After in seconds or as an HTTP date, else the configured default", () =>
    Effect.gen(function*() {
      const seconds = yield* chartError(json(429, { status: { error_code: 429, error_message: "slow down" } }, { "retry-after": "120" }))
      assert.deepInclude(seconds.error, { kind: "rate-limited", retryAfterSeconds: 120 })
      assert.strictEqual(seconds.calls, 1, "a 429 is never retried")

      const date = new Date(Date.now() + 90_000).toUTCString()
      const dated = yield* chartError(json(429, {}, { "retry-after": date }))
      assert.strictEqual(dated.error.kind, "rate-limited")
      assert.isAtLeast(dated.error.retryAfterSeconds, 88)
      assert.isAtMost(dated.error.retryAfterSeconds, 91)

      const bare = yield* chartError(html(429), { COINGECKO_DEFAULT_RETRY_AFTER_S: "17" })
      assert.deepInclude(bare.error, { kind: "rate-limited", retryAfterSeconds: 17 })
    }))

  it.live("a 2xx that is not the expected JSON is an invalid response, not retried", () =>
    Effect.gen(function*() {
      for (const body of ["[]", "{\"prices\":[[1,\"3\"]]}", "{\"prices\":[[1,2]", "<html></html>"]) {
        const { calls, error } = yield* chartError(() => new Response(body, { status: 200 }), { COINGECKO_RETRIES: "2" })
        assert.strictEqual(error.kind, "invalid-response", body)
        assert.strictEqual(calls, 1)
      }
    }))
})

describe("CoinGeckoClient requests", () => {
  it.live("tolerates null prices in a chart and sends the documented parameters", () => {
    const { layer, seen } = clientAnswering(json(200, { prices: [[1, null], [2, 3]], market_caps: [], total_volumes: [] }))
    return Effect.gen(function*() {
      const client = yield* CoinGeckoClient
      assert.deepStrictEqual(yield* client.marketChartRange("bitcoin", "eur", FROM_S, TO_S).pipe(spendingUntil(Number.POSITIVE_INFINITY, Charge.request(undefined))), [[1, null], [2, 3]])
      const { url } = seen[0]!
      assert.strictEqual(url.pathname, "/api/v3/coins/bitcoin/market_chart/range")
      assert.deepStrictEqual(Object.fromEntries(url.searchParams), { vs_currency: "eur", from: String(FROM_S), to: String(TO_S), interval: "daily" })
    }).pipe(Effect.provide(layer))
  })

  it.live("asks /coins/markets by ids with % changes, /coins/list, and the ranks by market cap page by page", () => {
    const { layer, seen } = clientAnswering(json(200, []))
    return Effect.gen(function*() {
      const client = yield* CoinGeckoClient
      yield* client.marketsByIds("usd", ["bitcoin", "ethereum"])
      yield* client.coinList
      yield* client.coinsByRank(2, 250)
      assert.deepInclude(Object.fromEntries(seen[0]!.url.searchParams), { ids: "bitcoin,ethereum", price_change_percentage: "24h,7d,30d" })
      assert.strictEqual(seen[1]!.url.pathname, "/api/v3/coins/list")
      assert.deepStrictEqual(Object.fromEntries(seen[2]!.url.searchParams), { vs_currency: "usd", order: "market_cap_desc", per_page: "250", page: "2" })
    }).pipe(Effect.provide(layer))
  })

  for (const [plan, header, other] of [["demo", "x-cg-demo-api-key", "x-cg-pro-api-key"], ["pro", "x-cg-pro-api-key", "x-cg-demo-api-key"]] as const) {
    it.live(`sends the ${plan} key in ${header}`, () => {
      const { layer, seen } = clientAnswering(json(200, ["usd"]), { COINGECKO_API_PLAN: plan, COINGECKO_API_KEY: "k-1" })
      return Effect.gen(function*() {
        const client = yield* CoinGeckoClient
        yield* client.supportedCurrencies
        assert.strictEqual(seen[0]!.headers[header], "k-1")
        assert.isUndefined(seen[0]!.headers[other])
      }).pipe(Effect.provide(layer))
    })
  }

  it.live("sends no key header without a key", () => {
    const { layer, seen } = clientAnswering(json(200, ["usd"]))
    return Effect.gen(function*() {
      const client = yield* CoinGeckoClient
      assert.deepStrictEqual(yield* client.supportedCurrencies, ["usd"])
      assert.isUndefined(seen[0]!.headers["x-cg-demo-api-key"])
    }).pipe(Effect.provide(layer))
  })
})
