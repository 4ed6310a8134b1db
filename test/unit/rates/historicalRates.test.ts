/**
 * The rates use case (src/rates/historicalRates.ts) over recording fakes of its ports, each a Layer: one
 * cold request visits them in the order its file reads, each once, for all its coins at once; who pays is
 * decided there (the request's caller, for every step that fetches); a second source is asked only for
 * what the first could not serve fresh, and the answer is remembered last.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Result } from "effect"
import { TestClock } from "effect/testing"
import { RatesAnswerMemo } from "../../../src/rates/answer.ts"
import { RatesDemand } from "../../../src/rates/coingecko/latestPrices.ts"
import * as HistoricalRates from "../../../src/rates/historicalRates.ts"
import { type Chart, CoinDirectory, DailyPoints, type Latest, LatestPrices, type LiveQuote, LiveQuotes, SecondSource, type Served} from "../../../src/rates/ports.ts"
import { RatesProvider } from "../../../src/rates/RatesProvider.ts"
import { sourceError, Spend } from "../../../src/rates/upstream.ts"

const NOW = Date.UTC(2026, 11, 1, 10)
const DAY = 86_400_000
const BUDGET_MS = 9_000

interface Visit {
  readonly port: string
  readonly args: ReadonlyArray<unknown>
}

/**
 * Fakes of every port, recording each visit; `failing` coins have no series from the first source;
 * `quoted` coins have a live quote.
 */
const recordingPorts = (options: { readonly failing?: ReadonlyArray<string>; readonly second?: boolean; readonly quoted?: ReadonlyArray<string> } = {}) => {
  const visits: Array<Visit> = []
  // Each visit records its arguments, then the \`Spend\` (who pays, until when) it was made under.
  const visit = (port: string, ...args: ReadonlyArray<unknown>) => Effect.gen(function*() {
    const spend = yield* Spend
    visits.push({ port, args: [...args, spend] })
  })
  const fresh = <A>(value: A): Served<A> => ({ value, storedAt: NOW, stale: false, holdsUntil: NOW + 60_000 })
  const coins = new Map([["BTC", { id: "bitcoin", name: "Bitcoin" }], ["ETH", { id: "ethereum", name: "Ethereum" }]])
  const first = { source: "coingecko" as const, attribution: "Data provided by CoinGecko" }
  const layer = Layer.mergeAll(
    Layer.succeed(CoinDirectory)({
      checkCurrency: (currency) => visit("CoinDirectory.checkCurrency", currency),
      resolve: (symbols) =>
        Effect.as(visit("CoinDirectory.resolve", symbols), { coins: new Map(symbols.map((s) => [s, coins.get(s) ?? null] as const)) })
    }),
    options.quoted === undefined ? LiveQuotes.layerNone : Layer.succeed(LiveQuotes)({
      sourcing: { source: "coinbase", attribution: "Data provided by Coinbase Exchange" },
      quotes: (wanted, currency) =>
        Effect.as(
          visit("LiveQuotes.quotes", wanted, currency),
          new Map(wanted.filter((coin) => options.quoted!.includes(coin.id)).map((coin) =>
            [coin.id, { value: { price: 101, change24h: 0.5 }, storedAt: NOW - 1_000, stale: false, holdsUntil: NOW + 1_000 } satisfies Served<LiveQuote>] as const))
        )
    }),
    Layer.succeed(LatestPrices)({
      ...first,
      latest: (ids, currency) =>
        Effect.as(visit("LatestPrices.latest", ids, currency), {
          latest: new Map(ids.map((id) => [id, fresh<Latest>({ name: id, price: 100, change24h: 1, change7d: 2, change30d: 3 })] as const)),
          failure: undefined
        })
    }),
    Layer.succeed(DailyPoints)({
      ...first,
      series: (ids, currency) =>
        Effect.as(
          visit("DailyPoints.series", ids, currency),
          new Map(ids.map((id) => [
            id,
            options.failing?.includes(id)
              ? Result.fail(sourceError("coingecko", "Transient", "test: down"))
              : Result.succeed(fresh<Chart>([[NOW - NOW % DAY - DAY, 90], [NOW - NOW % DAY, 95]]))
          ] as const))
        )
    }),
    options.second === false ? SecondSource.layerNone : Layer.succeed(SecondSource)({
      sourcing: { source: "coinbase", attribution: "Data provided by Coinbase Exchange" },
      ratesFor: (wanted, currency) =>
        Effect.as(
          visit("SecondSource.ratesFor", wanted, currency),
          new Map(wanted.map((coin) => [coin.id, {
            _tag: "Served" as const,
            rate: { name: coin.symbol, price: 99, change: { "24h": null, "7d": null, "30d": null }, series: [[NOW - NOW % DAY, 94] as const], asOf: NOW, holdsUntil: NOW + 60_000 }
          }] as const))
        )
    }),
    Layer.effect(
      RatesAnswerMemo,
      Effect.map(RatesAnswerMemo, (memo) => ({
        ...memo,
        remember: (query, answer) => {
          visits.push({ port: "RatesAnswerMemo.remember", args: [query] })
          return memo.remember(query, answer)
        }
      }))
    ).pipe(Layer.provide(RatesAnswerMemo.layer))
  )
  return { layer, visits }
}

const useCase = (ports: Layer.Layer<CoinDirectory | LiveQuotes | LatestPrices | DailyPoints | SecondSource | RatesAnswerMemo>) =>
  HistoricalRates.layer({ requestBudgetMs: BUDGET_MS }).pipe(Layer.provide(Layer.merge(ports, RatesDemand.layer)), Layer.provideMerge(RatesDemand.layer))

const ask = Effect.flatMap(RatesProvider, (rates) => rates.historical({ symbols: ["BTC", "ETH"], currency: "usd", days: 7, caller: "ip:198.51.100.7" }))

describe("the rates use case over its ports", () => {
  it.effect("one cold request visits each port once, in the order of its steps, for all its coins", () => {
    const ports = recordingPorts()
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { result } = yield* ask
      assert.deepStrictEqual(ports.visits.map((v) => v.port), [
        "CoinDirectory.checkCurrency",
        "CoinDirectory.resolve",
        "LatestPrices.latest",
        "DailyPoints.series",
        "RatesAnswerMemo.remember"
      ])
      assert.deepStrictEqual(ports.visits[2]!.args.slice(0, 2), [["bitcoin", "ethereum"], "usd"])
      assert.deepStrictEqual(ports.visits[3]!.args.slice(0, 2), [["bitcoin", "ethereum"], "usd"])
      assert.deepStrictEqual(result.rates.map((r) => [r.symbol, r.source, r.price]), [["BTC", "coingecko", 100], ["ETH", "coingecko", 100]])
    }).pipe(Effect.provide(useCase(ports.layer)))
  })

  it.effect("who pays is decided by the use case: the request's caller, the same charge for every fetching step", () => {
    const ports = recordingPorts()
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      yield* ask
      const prices = ports.visits[2]!.args[2] as Spend
      const points = ports.visits[3]!.args[2] as Spend
      assert.deepInclude(prices.charge, { _tag: "Request", caller: "ip:198.51.100.7" })
      assert.strictEqual(points.charge, prices.charge, "one request, one charge: its failures count once in a breaker")
      // With a second source, the first has two thirds of the request's budget; the lists a third.
      assert.strictEqual(prices.deadline, NOW + (BUDGET_MS * 2) / 3)
      assert.strictEqual((ports.visits[0]!.args[1] as Spend).deadline, NOW + BUDGET_MS / 3)
    }).pipe(Effect.provide(useCase(ports.layer)))
  })

  it.effect("a coin the first source cannot serve is asked of the second, once, after the first's steps and before the answer is remembered", () => {
    const ports = recordingPorts({ failing: ["ethereum"] })
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { result } = yield* ask
      assert.deepStrictEqual(ports.visits.map((v) => v.port), [
        "CoinDirectory.checkCurrency",
        "CoinDirectory.resolve",
        "LatestPrices.latest",
        "DailyPoints.series",
        "SecondSource.ratesFor",
        "RatesAnswerMemo.remember"
      ])
      assert.deepStrictEqual(ports.visits[4]!.args.slice(0, 2), [[{ symbol: "ETH", id: "ethereum" }], "usd"])
      assert.deepStrictEqual(result.rates.map((r) => [r.symbol, r.source]), [["BTC", "coingecko"], ["ETH", "coinbase"]])
      assert.strictEqual(result.source, "mixed")
    }).pipe(Effect.provide(useCase(ports.layer)))
  })

  it.effect("without a second source the first has the whole budget, and its failure is the answer: 502", () => {
    const ports = recordingPorts({ failing: ["ethereum"], second: false })
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const failure = yield* Effect.flip(ask)
      assert.strictEqual(failure._tag, "RatesUpstreamError")
      assert.strictEqual((ports.visits[2]!.args[2] as Spend).deadline, NOW + BUDGET_MS)
      assert.notInclude(ports.visits.map((v) => v.port), "RatesAnswerMemo.remember")
    }).pipe(Effect.provide(useCase(ports.layer)))
  })

  it.effect("live quotes are asked first, for every coin; the first source's latest prices only for the coins they do not cover", () => {
    const ports = recordingPorts({ quoted: ["bitcoin"] })
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { result } = yield* ask
      const order = ports.visits.map((v) => v.port)
      assert.isBelow(order.indexOf("LiveQuotes.quotes"), order.indexOf("LatestPrices.latest"))
      assert.deepStrictEqual(order.filter((port) => port !== "DailyPoints.series"), [
        "CoinDirectory.checkCurrency",
        "CoinDirectory.resolve",
        "LiveQuotes.quotes",
        "LatestPrices.latest",
        "RatesAnswerMemo.remember"
      ])
      const quotes = ports.visits.find((v) => v.port === "LiveQuotes.quotes")!
      assert.deepStrictEqual(quotes.args.slice(0, 2), [[{ symbol: "BTC", id: "bitcoin" }, { symbol: "ETH", id: "ethereum" }], "usd"])
      const latest = ports.visits.find((v) => v.port === "LatestPrices.latest")!
      assert.deepStrictEqual(latest.args.slice(0, 2), [["ethereum"], "usd"])
      assert.deepStrictEqual(result.rates.map((r) => [r.symbol, r.price, r.sources.price, r.sources.series]), [
        ["BTC", 101, "coinbase", "coingecko"],
        ["ETH", 100, "coingecko", "coingecko"]
      ])
    }).pipe(Effect.provide(useCase(ports.layer)))
  })

  it.effect("every coin quoted live: the first source's latest prices are not asked at all", () => {
    const ports = recordingPorts({ quoted: ["bitcoin", "ethereum"] })
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { freshUntil, result } = yield* ask
      assert.notInclude(ports.visits.map((v) => v.port), "LatestPrices.latest")
      assert.strictEqual(result.attribution, "Data provided by CoinGecko; Data provided by Coinbase Exchange")
      assert.strictEqual(freshUntil, NOW + 1_000, "a new tick may change the answer a second later")
    }).pipe(Effect.provide(useCase(ports.layer)))
  })

  it.effect("the request's caller is counted in the demand first, whatever the answer (a failure too)", () => {
    const ports = recordingPorts({ failing: ["ethereum"], second: false })
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      yield* Effect.flip(ask)
      yield* Effect.flip(Effect.flatMap(RatesProvider, (rates) => rates.historical({ symbols: ["ETH"], currency: "EUR", days: 7 })))
      const { callers, weights } = (yield* RatesDemand).weights()
      assert.strictEqual(callers, 2)
      assert.deepStrictEqual([...weights], [["usd", 1], ["eur", 1]])
    }).pipe(Effect.provide(useCase(ports.layer)))
  })

  it.effect("a repeat while the answer holds is the edge's: the memo has it", () => {
    const ports = recordingPorts()
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { body } = yield* ask
      const memo = yield* RatesAnswerMemo
      assert.strictEqual(memo.recall({ symbols: ["BTC", "ETH"], currency: "usd", days: 7 }), body)
    }).pipe(Effect.provide(Layer.merge(useCase(ports.layer), ports.layer)))
  })
})
