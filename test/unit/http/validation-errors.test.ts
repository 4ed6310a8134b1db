/**
 * A validation problem lists every failed member of the body (CONTRACT C7), in a stable order.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "../../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const post = (path: string, body: unknown) =>
  fetch(app.url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

const pointersOf = async (res: Response) => {
  expect(res.status).toBe(400)
  const problem = await res.json()
  expect(problem.code).toBe("validation_failed")
  return (problem.errors as Array<{ pointer: string; detail: string }>).map((e) => e.pointer)
}

describe("validation_failed lists every failed member", () => {
  it("exchange rates: each bad symbol and the bad days, in body order", async () => {
    const body = { cryptos: ["BTC", "B TC", ""], days: "7" }
    const first = await pointersOf(await post("/api/v1/exchange-rates", body))
    expect(first).toEqual(["/cryptos/1", "/cryptos/2", "/days"])
    // The same body gives the same list (stable order).
    expect(await pointersOf(await post("/api/v1/exchange-rates", body))).toEqual(first)
  })

  it("subscribe: a missing member, a bad locale and an excess property together", async () => {
    const pointers = await pointersOf(await post("/api/subscribe", { locale: "de", extra: 1 }))
    expect(pointers).toEqual(expect.arrayContaining(["/email", "/locale", "/extra"]))
    expect(pointers).toHaveLength(3)
  })
})
