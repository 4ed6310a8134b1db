/**
 * The typed client derived from the HttpApi, against the real server: typed successes, problems
 * decoded back into their classes.
 */
import { FetchHttpClient } from "effect/http"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeApiClient, NoValidSymbols, ServiceUnavailable, UpstreamError, ValidationFailed } from "../../../src/client.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const run = <A, E>(f: (client: Effect.Success<ReturnType<typeof makeApiClient>>) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.flatMap(makeApiClient({ baseUrl: app.url }), f).pipe(Effect.provide(FetchHttpClient.layer))
  )

describe("typed client", () => {
  it("reads health and rates as typed values", async () => {
    const health = await run((c) => c.getHealth())
    expect(health.status).toBe("healthy")
    const rates = await run((c) => c.getHistoricalExchangeRates({ payload: { cryptos: ["BTC"], days: 3 } }))
    expect(rates.rates[0]?.series).toHaveLength(3)
  })

  it("turns problems back into their classes", async () => {
    const flip = <A, E>(e: Effect.Effect<A, E>) => Effect.flip(e)
    expect(await run((c) => flip(c.getHistoricalExchangeRates({ payload: { cryptos: ["DOWN"] } })))).toBeInstanceOf(UpstreamError)
    const busy = await run((c) => flip(c.getHistoricalExchangeRates({ payload: { cryptos: ["BUSY"] } })))
    expect(busy).toBeInstanceOf(ServiceUnavailable)
    expect((busy as ServiceUnavailable).retryAfter).toBe(30)
    const none = await run((c) => flip(c.getHistoricalExchangeRates({ payload: { cryptos: ["NOPE"] } })))
    expect(none).toBeInstanceOf(NoValidSymbols)
    expect((none as NoValidSymbols).unknown).toEqual(["NOPE"])
    const invalid = await run((c) => flip(c.subscribeToUpdates({ payload: { email: "x@localhost", locale: "en" } })))
    expect(invalid).toBeInstanceOf(ValidationFailed)
  })

  it("GET /api/v1/rates: the same rates as the POST, its query sent comma-separated; its problems as classes", async () => {
    const viaGet = await run((c) => c.getExchangeRates({ query: { cryptos: ["btc", "ETH"], currency: "eur", days: 3 } }))
    const viaPost = await run((c) => c.getHistoricalExchangeRates({ payload: { cryptos: ["btc", "ETH"], currency: "eur", days: 3 } }))
    expect(viaGet).toEqual(viaPost)
    expect(viaGet.rates.map((r) => r.symbol)).toEqual(["BTC", "ETH"])
    const flip = <A, E>(e: Effect.Effect<A, E>) => Effect.flip(e)
    expect(await run((c) => flip(c.getExchangeRates({ query: { cryptos: ["DOWN"] } })))).toBeInstanceOf(UpstreamError)
    const busy = await run((c) => flip(c.getExchangeRates({ query: { cryptos: ["BUSY"] } })))
    expect(busy).toBeInstanceOf(ServiceUnavailable)
    expect((busy as ServiceUnavailable).retryAfter).toBe(30)
    const none = await run((c) => flip(c.getExchangeRates({ query: { cryptos: ["NOPE"] } })))
    expect((none as NoValidSymbols).unknown).toEqual(["NOPE"])
    // A query the contract refuses is refused by the client itself, before any request.
    const before = app.logs.length
    const invalid = await run((c) => flip(c.getExchangeRates({ query: { cryptos: ["B TC"], days: 0 } })))
    expect((invalid as { _tag?: string })._tag).toBe("SchemaError")
    expect(app.logs.length).toBe(before)
  })
})
