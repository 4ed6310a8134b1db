/**
 * answer.ts with a second source (issue 22): which coins CoinGecko could not serve fresh, a rate per
 * source, the answer's `source` and `attribution`, and CoinGecko's verdict when neither source can
 * serve a coin (C4 "Second source", amended: 502 for a failure, 503 with the shorter wait otherwise).
 */
import { describe, expect, it } from "vitest"
import { Result } from "effect"
import { answerSource, assembleAnswer, type Gathered, notServedFresh } from "../../../src/rates/answer.ts"
import type { SecondOutcome } from "../../../src/rates/ports.ts"
import { type SourceError, type SourceFailureTag, sourceError } from "../../../src/rates/upstream.ts"

const DAY = 86_400_000
const T = Date.UTC(2026, 10, 22, 10)
const series = [[T - 10 * 3_600_000 - DAY, 100], [T - 10 * 3_600_000, 110]] as const
const resolved = { coins: new Map([["BTC", { id: "bitcoin", name: "Bitcoin" }], ["ETH", { id: "ethereum", name: "Ethereum" }], ["FOO", null]]) }
const fresh = <A>(value: A) => ({ value, storedAt: T, stale: false, holdsUntil: T + 60_000 })
const latestOf = (price: number) => fresh({ name: "x", price, change24h: 1, change7d: 2, change30d: 3 })
type ChartOutcome = Gathered["charts"] extends ReadonlyMap<string, infer C> ? C : never
const chartsOf = (entries: ReadonlyArray<readonly [string, ChartOutcome]>): Gathered["charts"] => new Map(entries)
const coinGecko = (reason: SourceFailureTag, retryAfterSeconds = 0) => sourceError("coingecko", reason, reason, retryAfterSeconds)
const coinbase = (reason: SourceFailureTag, retryAfterSeconds = 0) => sourceError("coinbase", reason, reason, retryAfterSeconds)
const down = coinGecko("RateLimited", 30)
const first = { source: "coingecko" as const, attribution: "Data provided by CoinGecko" }
const secondSourcing = { source: "coinbase" as const, attribution: "Data provided by Coinbase Exchange" }

const gathered = (overrides: Partial<Gathered>): Gathered => ({
  query: { symbols: ["BTC", "ETH", "FOO"], currency: "usd", days: 2 },
  startedAt: T,
  first,
  resolved,
  latest: { latest: new Map([["bitcoin", latestOf(64_000)], ["ethereum", latestOf(3_000)]]), failure: undefined },
  charts: chartsOf([["bitcoin", Result.succeed(fresh(series))], ["ethereum", Result.succeed(fresh(series))]]),
  ...overrides
})

const coinbaseRate: SecondOutcome = {
  _tag: "Served",
  rate: { name: "Ethereum", price: 3_001, change: { "24h": 0.5, "7d": null, "30d": null }, series, asOf: T + 5, holdsUntil: T + 30_000 }
}

describe("answer with a second source", () => {
  it("asks nothing when CoinGecko served every coin fresh", () => {
    const g = gathered({})
    expect(notServedFresh(g.resolved, new Map(), g.latest, g.charts)).toEqual([])
  })

  it("asks for coins whose chart failed, whose copy is stale, or whose latest call failed; never for a 404", () => {
    const g = gathered({
      latest: { latest: new Map([["bitcoin", { ...latestOf(1), stale: true }]]), failure: down },
      charts: chartsOf([["bitcoin", Result.succeed(fresh(series))], ["ethereum", Result.fail(down)]])
    })
    expect(notServedFresh(g.resolved, new Map(), g.latest, g.charts)).toEqual([{ symbol: "BTC", id: "bitcoin" }, { symbol: "ETH", id: "ethereum" }])
    const missing = gathered({ charts: chartsOf([["bitcoin", Result.succeed(fresh(null))], ["ethereum", Result.succeed(fresh(series))]]) })
    expect(notServedFresh(missing.resolved, new Map(), missing.latest, missing.charts)).toEqual([])
  })

  it("one rate from each: source mixed, both attributed, the Coinbase rate held no longer than its minute", () => {
    const answer = assembleAnswer(gathered({ second: { outcomes: new Map([["ethereum", coinbaseRate]]), sourcing: secondSourcing } }))
    if (Result.isFailure(answer)) throw answer.failure
    const { freshUntil, result } = answer.success
    expect(result.rates.map((r) => [r.symbol, r.source, r.price])).toEqual([["BTC", "coingecko", 64_000], ["ETH", "coinbase", 3_001]])
    expect(result.source).toBe("mixed")
    expect(result.attribution).toBe("Data provided by CoinGecko; Data provided by Coinbase Exchange")
    expect(result.unknown).toEqual(["FOO"])
    expect(freshUntil).toBe(T + 30_000)
  })

  const failing = (firstError: SourceError, secondError: SourceError): Gathered =>
    gathered({
      charts: chartsOf([["bitcoin", Result.succeed(fresh(series))], ["ethereum", Result.fail(firstError)]]),
      second: { outcomes: new Map([["ethereum", { _tag: "Failed", error: secondError }]]), sourcing: secondSourcing }
    })
  const verdict = (g: Gathered) => {
    const answer = assembleAnswer(g)
    return Result.isFailure(answer) ? answer.failure : undefined
  }

  it("neither source, CoinGecko unable to be asked: 503 with the shorter wait; a source that does not list the coin has none", () => {
    expect(verdict(failing(down, coinbase("RateLimited", 2)))).toMatchObject({ _tag: "RatesUnavailableError", retryAfterSeconds: 2 })
    expect(verdict(failing(down, coinbase("NotFound")))).toMatchObject({ _tag: "RatesUnavailableError", retryAfterSeconds: 30 })
    expect(verdict(failing(coinGecko("CircuitOpen", 20), coinbase("Transient")))).toMatchObject({ _tag: "RatesUnavailableError", retryAfterSeconds: 1 })
  })

  it("neither source, CoinGecko failing: its 502 stands, whatever Coinbase did (a rejected key stays visible)", () => {
    for (const kind of ["Transient", "InvalidResponse", "Rejected"] as const) {
      for (const second of [coinbase("Transient"), coinbase("RateLimited", 2), coinbase("NotFound"), coinbase("Unavailable", 10)]) {
        expect(verdict(failing(coinGecko(kind), second)), `${kind} × ${second.kind}`).toMatchObject({ _tag: "RatesUpstreamError" })
      }
    }
  })

  it("names the answer's source", () => {
    expect(answerSource(new Set(), "coingecko")).toBe("coingecko")
    expect(answerSource(new Set(["coinbase"] as const), "coingecko")).toBe("coinbase")
    expect(answerSource(new Set(["coinbase", "coingecko"] as const), "coingecko")).toBe("mixed")
  })
})

describe("answer with live quotes (issue 28)", () => {
  const live = { sourcing: secondSourcing, quotes: new Map([["bitcoin", { value: { price: 64_321.5, change24h: 1.25 }, storedAt: T - 2_000, stale: false, holdsUntil: T + 1_000 }]]) }

  it("a live quote is the rate's price and 24 h change; its series stays the first source's: the rate says both, and when its price was observed", () => {
    const answer = assembleAnswer(gathered({ live, latest: { latest: new Map([["ethereum", latestOf(3_000)]]), failure: undefined } }))
    if (Result.isFailure(answer)) throw answer.failure
    const { freshUntil, result } = answer.success
    const [btc, eth] = result.rates
    expect(btc).toMatchObject({ price: 64_321.5, source: "mixed", sources: { price: "coinbase", series: "coingecko" }, asOf: "2026-11-22T09:59:58Z" })
    expect(btc!.change["24h"]).toBe(1.25)
    expect(eth).toMatchObject({ price: 3_000, source: "coingecko", sources: { price: "coingecko", series: "coingecko" }, asOf: "2026-11-22T10:00:00Z" })
    expect(result.source).toBe("mixed")
    expect(result.attribution).toBe("Data provided by CoinGecko; Data provided by Coinbase Exchange")
    // asOf: the oldest price observed; repeated for a second at most (a new tick may change it).
    expect(result.asOf).toBe("2026-11-22T09:59:58Z")
    expect(freshUntil).toBe(T + 1_000)
  })

  it("7 d and 30 d changes of a live price are measured on the series, from the point nearest that many days before", () => {
    const year = Array.from({ length: 40 }, (_, i) => [T - (T % DAY) - (39 - i) * DAY, 100 + i] as const)
    const answer = assembleAnswer(gathered({
      live,
      query: { symbols: ["BTC"], currency: "usd", days: 2 },
      charts: chartsOf([["bitcoin", Result.succeed(fresh(year))]])
    }))
    if (Result.isFailure(answer)) throw answer.failure
    const change = answer.success.result.rates[0]!.change
    const weekAgo = 100 + 39 - 7
    const monthAgo = 100 + 39 - 30
    expect(change["7d"]).toBeCloseTo(((64_321.5 - weekAgo) / weekAgo) * 100, 9)
    expect(change["30d"]).toBeCloseTo(((64_321.5 - monthAgo) / monthAgo) * 100, 9)
  })

  it("a coin with a live quote needs no fresh latest price of the first source: only its chart decides whether the second is asked", () => {
    const g = gathered({ live, latest: { latest: new Map(), failure: down } })
    expect(notServedFresh(g.resolved, live.quotes, g.latest, g.charts)).toEqual([{ symbol: "ETH", id: "ethereum" }])
    const staleChart = gathered({ live, charts: chartsOf([["bitcoin", Result.succeed({ ...fresh(series), stale: true })], ["ethereum", Result.succeed(fresh(series))]]) })
    expect(notServedFresh(staleChart.resolved, live.quotes, staleChart.latest, staleChart.charts)).toEqual([{ symbol: "BTC", id: "bitcoin" }])
  })

  it("a coin the second source serves keeps its live price: the series is the second source's, credited once", () => {
    const ethQuote = { value: { price: 3_010, change24h: 0.75 }, storedAt: T - 1_000, stale: false, holdsUntil: T + 1_000 }
    const answer = assembleAnswer(gathered({
      live: { ...live, quotes: new Map([...live.quotes, ["ethereum", ethQuote]]) },
      query: { symbols: ["BTC", "ETH"], currency: "usd", days: 2 },
      charts: chartsOf([["bitcoin", Result.succeed(fresh(series))], ["ethereum", Result.fail(down)]]),
      second: { outcomes: new Map([["ethereum", coinbaseRate]]), sourcing: secondSourcing },
      first: { source: "coingecko", attribution: "Data provided by CoinGecko" }
    }))
    if (Result.isFailure(answer)) throw answer.failure
    expect(answer.success.result.attribution).toBe("Data provided by CoinGecko; Data provided by Coinbase Exchange")
    expect(answer.success.result.rates.map((r) => r.sources)).toEqual([{ price: "coinbase", series: "coingecko" }, { price: "coinbase", series: "coinbase" }])
    expect(answer.success.result.rates[1]).toMatchObject({ price: 3_010, source: "coinbase", asOf: "2026-11-22T09:59:59Z" })
    expect(answer.success.result.rates[1]!.change["24h"]).toBe(0.75)
    expect(answer.success.freshUntil).toBe(T + 1_000)
  })
})
