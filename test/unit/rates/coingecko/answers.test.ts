/**
 * CoinGecko's answers as it really gives them (issue 35, findings 2 and 3), through the client over HTTP
 * against the strict emulator: a `/coins/markets` URL past about 8,100 characters is the CDN's 414, so
 * the calls are split to stay under 8,000 (commas sent as %2C, every parameter counted); a 414 that came
 * anyway is a request of ours at fault, not a refused key; Demo's 365 days of history are 401 with error
 * 10012, which is the plan's limit, logged as such, and not our key refused.
 */
import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"
import { CoinGeckoClient } from "../../../../src/rates/coingecko/CoinGeckoClient.ts"
import { CoinGeckoConfig } from "../../../../src/rates/coingecko/CoinGeckoConfig.ts"
import { MonthlyBudget } from "../../../../src/rates/coingecko/credits/MonthlyBudget.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../../emulators/coingecko.ts"
import { PLENTY } from "../../../support/credits.ts"
import { configFrom } from "../../../support/config.ts"
import { upstreamHttp } from "../../../support/upstream.ts"
import { EMULATOR_NOW, healthyEnv } from "../../../support/rates.ts"

let emulator: CoinGeckoEmulator
beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: EMULATOR_NOW })
})
afterAll(() => emulator.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.resetStats()
})

/** The client as the service builds it, against the emulator, on the real clock, with credits aplenty. */
const client = () =>
  CoinGeckoClient.layer.pipe(
    Layer.provide(Layer.mergeAll(
      CoinGeckoConfig.layer.pipe(Layer.provide(configFrom(healthyEnv(emulator.url)))),
      MonthlyBudget.layerMemory(Number(PLENTY)),
      upstreamHttp
    ))
  )

/** `count` ids of bridged or wrapped tokens, 40 characters each, as CoinGecko names them. */
const longIds = (count: number) => Array.from({ length: count }, (_, i) => `bridged-wrapped-token-on-chain-${String(i).padStart(9, "0")}`)

describe("/coins/markets by ids, within the CDN's URL length (finding 2)", () => {
  it.live("250 coins with 40-character ids asked at once: no 414, each call's whole URL under 8,000 characters, every row back", () =>
    Effect.gen(function*() {
      const ids = ["bitcoin", ...longIds(248), "ethereum"]
      assert.isTrue(ids.slice(1, -1).every((id) => id.length === 40))
      const coingecko = yield* CoinGeckoClient
      const rows = yield* coingecko.marketsByIds("usd", ids)
      assert.sameMembers(rows.map((row) => row.id), ["bitcoin", "ethereum"], "rows of every call, together")
      const calls = emulator.stats().markets
      // About 10,800 characters of ids and commas (%2C): two calls, as few as the length allows.
      assert.strictEqual(calls.length, 2)
      for (const call of calls) assert.isBelow(call.urlChars, 8_000)
      assert.strictEqual(emulator.stats().credits, 2, "every call answered 200")
    }).pipe(Effect.provide(client())))

  it.live("a 414 that came anyway is our request at fault, typed so: not our key refused", () => {
    const http = HttpClient.make((request) =>
      Effect.succeed(HttpClientResponse.fromWeb(request, new Response("<html><head><title>414 Request-URI Too Large</title></head></html>", { status: 414, headers: { "content-type": "text/html" } }))))
    const layer = CoinGeckoClient.layer.pipe(
      Layer.provide(Layer.mergeAll(
        CoinGeckoConfig.layer.pipe(Layer.provide(configFrom(healthyEnv("http://upstream.test/api/v3")))),
        MonthlyBudget.layerMemory(Number(PLENTY)),
        Layer.succeed(HttpClient.HttpClient)(http)
      ))
    )
    return Effect.gen(function*() {
      const coingecko = yield* CoinGeckoClient
      const error = yield* Effect.flip(coingecko.marketsByIds("usd", ["bitcoin"]))
      assert.strictEqual(error.kind, "bad-request")
      assert.include(error.detail, "414")
      assert.notInclude(error.detail, "key")
    }).pipe(Effect.provide(layer))
  })
})

describe("Demo's 365 days of history (finding 3)", () => {
  it.live("401 with error 10012 is the plan's limit, logged as such: not our key refused", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.layer([Logger.make(({ logLevel, message }) => void lines.push(`${logLevel} ${JSON.stringify(message)}`))])
      const coingecko = yield* CoinGeckoClient
      const yearAndADayAgo = Math.floor((EMULATOR_NOW - 366 * 86_400_000) / 1000)
      const error = yield* Effect.flip(coingecko.marketChartRange("bitcoin", "usd", yearAndADayAgo, EMULATOR_NOW / 1000)).pipe(Effect.provide(capture))
      assert.strictEqual(error.kind, "beyond-plan")
      assert.include(error.detail, "beyond the plan's history")
      assert.include(error.detail, "10012")
      assert.notInclude(error.message, "key")
      assert.strictEqual(emulator.stats().byPath["/coins/bitcoin/market_chart/range"], 1, "an answer, not a fault: not retried")
      const said = lines.filter((line) => line.includes("10012"))
      assert.strictEqual(said.length, 1, lines.join("\n"))
      assert.match(said[0]!, /^Warn .*beyond the plan's history/)
      assert.notInclude(said[0]!, "key")
    }).pipe(Effect.provide(client())))
})
