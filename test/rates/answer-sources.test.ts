/**
 * answer.ts with a second source (issue 22): which coins CoinGecko could not serve fresh, a rate per
 * source, the answer's `source` and `attribution`, and the 503 when neither source can serve a coin.
 */
import { describe, expect, it } from "vitest"
import { Result } from "effect"
import { answerSource, assembleAnswer, type Gathered, notServedFresh } from "../../src/rates/answer.ts"
import { CoinbaseError } from "../../src/rates/coinbase/coinbaseResponses.ts"
import { CoinGeckoError } from "../../src/rates/coinGeckoResponses.ts"
import type { SecondOutcome } from "../../src/rates/fallback/SecondSource.ts"

const DAY = 86_400_000
const T = Date.UTC(2026, 10, 22, 10)
const series = [[T - 10 * 3_600_000 - DAY, 100], [T - 10 * 3_600_000, 110]] as const
const resolved = { coins: new Map([["BTC", { id: "bitcoin", name: "Bitcoin" }], ["ETH", { id: "ethereum", name: "Ethereum" }], ["FOO", null]]) }
const fresh = <A>(value: A) => ({ value, storedAt: T, stale: false, holdsUntil: T + 60_000 })
const latestOf = (price: number) => fresh({ name: "x", price, change24h: 1, change7d: 2, change30d: 3 })
type ChartOutcome = Gathered["charts"] extends ReadonlyMap<string, infer C> ? C : never
const chartsOf = (entries: ReadonlyArray<readonly [string, ChartOutcome]>): Gathered["charts"] => new Map(entries)
const down = new CoinGeckoError({ kind: "rate-limited", detail: "429", retryAfterSeconds: 30 })

const gathered = (overrides: Partial<Gathered>): Gathered => ({
  query: { symbols: ["BTC", "ETH", "FOO"], currency: "usd", days: 2 },
  startedAt: T,
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
    expect(notServedFresh(g.resolved, g.latest, g.charts)).toEqual([])
  })

  it("asks for coins whose chart failed, whose copy is stale, or whose latest call failed; never for a 404", () => {
    const g = gathered({
      latest: { latest: new Map([["bitcoin", { ...latestOf(1), stale: true }]]), failure: down },
      charts: chartsOf([["bitcoin", Result.succeed(fresh(series))], ["ethereum", Result.fail(down)]])
    })
    expect(notServedFresh(g.resolved, g.latest, g.charts)).toEqual([{ symbol: "BTC", id: "bitcoin" }, { symbol: "ETH", id: "ethereum" }])
    const missing = gathered({ charts: chartsOf([["bitcoin", Result.succeed(fresh(null))], ["ethereum", Result.succeed(fresh(series))]]) })
    expect(notServedFresh(missing.resolved, missing.latest, missing.charts)).toEqual([])
  })

  it("one rate from each: source mixed, both attributed, the Coinbase rate held no longer than its minute", () => {
    const answer = assembleAnswer(gathered({ second: new Map([["ethereum", coinbaseRate]]), secondAttribution: "Data provided by Coinbase Exchange" }))
    if (Result.isFailure(answer)) throw answer.failure
    const { freshUntil, result } = answer.success
    expect(result.rates.map((r) => [r.symbol, r.source, r.price])).toEqual([["BTC", "coingecko", 64_000], ["ETH", "coinbase", 3_001]])
    expect(result.source).toBe("mixed")
    expect(result.attribution).toBe("Data provided by CoinGecko; Data provided by Coinbase Exchange")
    expect(result.unknown).toEqual(["FOO"])
    expect(freshUntil).toBe(T + 30_000)
  })

  it("neither source: 503 with the shorter wait; a source that does not list the coin has none", () => {
    const failing = (error: CoinbaseError): Gathered =>
      gathered({
        charts: chartsOf([["bitcoin", Result.succeed(fresh(series))], ["ethereum", Result.fail(down)]]),
        second: new Map([["ethereum", { _tag: "Failed", error }]])
      })
    const cooling = assembleAnswer(failing(new CoinbaseError({ kind: "rate-limited", detail: "429", retryAfterSeconds: 2 })))
    expect(Result.isFailure(cooling) && cooling.failure).toMatchObject({ _tag: "RatesUnavailableError", retryAfterSeconds: 2 })
    const unlisted = assembleAnswer(failing(new CoinbaseError({ kind: "not-found", detail: "not listed", retryAfterSeconds: 0 })))
    expect(Result.isFailure(unlisted) && unlisted.failure).toMatchObject({ _tag: "RatesUnavailableError", retryAfterSeconds: 30 })
  })

  it("names the answer's source", () => {
    expect(answerSource(new Set())).toBe("coingecko")
    expect(answerSource(new Set(["coinbase"] as const))).toBe("coinbase")
    expect(answerSource(new Set(["coinbase", "coingecko"] as const))).toBe("mixed")
  })
})
