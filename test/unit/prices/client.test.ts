/** The typed client's price stream (src/client.ts `priceEvents`, C10): typed events as an async iterable, refusals as problems. */
import { Effect } from "effect"
import { FetchHttpClient } from "effect/http"
import { afterAll, beforeAll, expect, it } from "vitest"
import { makeApiClient, NoValidSymbols } from "../../../src/client.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const client = () => Effect.runPromise(makeApiClient({ baseUrl: app.url }).pipe(Effect.provide(FetchHttpClient.layer)))

it("yields the snapshot, typed, then closes when the iteration ends", async () => {
  const events = await Effect.runPromise((await client()).priceEvents({ cryptos: ["BTC", "FOO"] }).pipe(Effect.provide(FetchHttpClient.layer)))
  for await (const event of events) {
    expect(event.event).toBe("snapshot")
    if (event.event === "snapshot") {
      expect(event.data.currency).toBe("USD")
      expect(event.data.prices.map((p) => p.symbol)).toEqual(["BTC"])
      expect(event.data.unknown).toEqual(["FOO"])
    }
    break
  }
})

it("fails with the contract's problem before any event", async () => {
  const failed = await Effect.runPromise(Effect.flip((await client()).priceEvents({ cryptos: ["FOO"] })).pipe(Effect.provide(FetchHttpClient.layer)))
  expect(failed).toBeInstanceOf(NoValidSymbols)
})
