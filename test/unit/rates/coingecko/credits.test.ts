/**
 * CoinGecko bills an answer 200, one credit; a refused or failed call costs none but counts toward the
 * minute's limit (issue 35, finding 1; CONTRACT C4 "Over a month", amended). With a stand-in CoinGecko
 * that counts its answers: the ledger spends exactly the answers 200; calls in flight together hold their
 * credits, so they never spend more than there is; the coin index's rank pages load as one unit, so that
 * a refusal part-way neither wastes what was billed nor leaves the ranks waiting for a whole unit again.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"
import { CoinGeckoClient } from "../../../../src/rates/coingecko/CoinGeckoClient.ts"
import { CoinGeckoConfig } from "../../../../src/rates/coingecko/CoinGeckoConfig.ts"
import { MonthlyBudget } from "../../../../src/rates/coingecko/credits/MonthlyBudget.ts"
import * as Directory from "../../../../src/rates/coingecko/directory.ts"
import { CopyStore } from "../../../../src/rates/copies/CopyStore.ts"
import { CoinDirectory } from "../../../../src/rates/ports.ts"
import { Charge, spendingUntil } from "../../../../src/rates/upstream.ts"
import { configFrom, type Env } from "../../../support/config.ts"

/** A stand-in CoinGecko: `answer` decides each call's status (200 gets a body fit for its path); it counts what it answered. */
const standIn = (answer: (url: URL) => number, delayMs = 0) => {
  const answered = { all: 0, ok: 0, pages: [] as Array<number> }
  const http = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      if (delayMs > 0) yield* Effect.sleep(delayMs)
      const status = answer(url)
      answered.all++
      if (status === 200) answered.ok++
      const page = Number(url.searchParams.get("page") ?? 0)
      if (page > 0) answered.pages.push(page)
      const body = status !== 200
        ? { status: { error_code: status, error_message: "refused" } }
        : url.pathname.endsWith("/supported_vs_currencies")
        ? ["usd"]
        : url.pathname.endsWith("/coins/list")
        ? [{ id: "pepe", symbol: "pepe", name: "Pepe" }]
        : page > 0
        // Four full pages of 250 ranked coins, Pepe among them on page 4.
        ? Array.from({ length: 250 }, (_, i) => {
          const rank = (page - 1) * 250 + i + 1
          return rank === 900 ? { id: "pepe", symbol: "pepe", name: "Pepe", current_price: 1, market_cap_rank: rank } : { id: `coin-${rank}`, symbol: `c${rank}`, name: `Coin ${rank}`, current_price: 1, market_cap_rank: rank }
        })
        : { prices: [[1, 2]] }
      return HttpClientResponse.fromWeb(request, new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } }))
    }))
  return { http: Layer.succeed(HttpClient.HttpClient)(http), answered }
}

const config = (env: Env) =>
  CoinGeckoConfig.layer.pipe(Layer.provide(configFrom({
    COINGECKO_BASE_URL: "http://upstream.test/api/v3",
    COINGECKO_CALLS_PER_MIN: "1000",
    COINGECKO_RETRIES: "0",
    COINGECKO_BREAKER_FAILURES: "1000",
    ...env
  })))

/** The client over `http`, on a small plan (1,000 credits: cold 10.5, lists 6), its ledger in memory. */
const clientOver = (http: Layer.Layer<HttpClient.HttpClient>, env: Env = {}) =>
  CoinGeckoClient.layer.pipe(Layer.provideMerge(Layer.mergeAll(config(env), MonthlyBudget.layerMemory(1_000), http)))

const chart = (i: number) =>
  Effect.flatMap(CoinGeckoClient, (client) => Effect.result(client.marketChartRange(`coin-${i}`, "usd", 1_795_305_600, 1_795_392_000).pipe(spendingUntil(Number.POSITIVE_INFINITY, Charge.request(undefined)))))

describe("a credit per answer 200", () => {
  it.live("calls in flight together hold their credits (never more calls than credits); those CoinGecko refused give theirs back", () => {
    let status = 403
    const { answered, http } = standIn(() => status, 50)
    return Effect.gen(function*() {
      const month = yield* MonthlyBudget
      const refused = yield* Effect.all(Array.from({ length: 20 }, (_, i) => chart(i)), { concurrency: "unbounded" })
      assert.strictEqual(answered.all, 10, "ten credits in the cold part: ten calls")
      const kinds = refused.map((result) => (result._tag === "Success" ? "ok" : result.failure.kind))
      assert.strictEqual(kinds.filter((kind) => kind === "rejected").length, 10)
      assert.strictEqual(kinds.filter((kind) => kind === "rate-limited").length, 10)
      assert.strictEqual((yield* month.snapshot).state.spent, 0, "403s are billed nothing")
      status = 200
      const served = yield* Effect.all(Array.from({ length: 20 }, (_, i) => chart(i)), { concurrency: "unbounded" })
      assert.strictEqual(served.filter((result) => result._tag === "Success").length, 10, "the refused calls' credits were there again")
      assert.strictEqual(answered.ok, 10)
      assert.strictEqual((yield* month.snapshot).state.spent, answered.ok)
    }).pipe(Effect.provide(clientOver(http)))
  })

  it.live("the rank pages are one unit: a refusal part-way keeps what was billed, gives back the rest, and the next try asks only the pages missing", () => {
    // Page 3 refused once (a 500), as CoinGecko does now and then.
    let refusals = 1
    const { answered, http } = standIn((url) => (url.searchParams.get("page") === "3" && refusals-- > 0 ? 500 : 200))
    const directory = Directory.layer.pipe(Layer.provideMerge(clientOver(http, { COINGECKO_AUX_RETRY_MS: "100" })), Layer.provide(CopyStore.layerMemory()))
    return Effect.gen(function*() {
      const coins = yield* CoinDirectory
      const month = yield* MonthlyBudget
      // The lists' part holds one load (6 credits): the currency list, the coin list, four rank pages.
      let resolved: string | undefined
      for (let tries = 0; tries < 40 && resolved === undefined; tries++) {
        const found = yield* Effect.result(coins.resolve(["PEPE"]).pipe(spendingUntil(Date.now() + 1_000)))
        if (found._tag === "Success") resolved = found.success.coins.get("PEPE")?.id
        else yield* Effect.sleep(50)
      }
      assert.strictEqual(resolved, "pepe", "the ranks loaded on the next try, without waiting hours for a whole unit's credits")
      assert.deepStrictEqual(answered.pages, [1, 2, 3, 3, 4], "pages 1 and 2 were paid once")
      assert.strictEqual((yield* month.snapshot).state.spent, answered.ok, "the ledger spent what CoinGecko billed")
      assert.strictEqual(answered.ok, 6)
    }).pipe(Effect.provide(directory))
  })
})
