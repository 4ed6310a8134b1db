/**
 * Issue 13's "Done when", as one run against one CoinGecko emulator with the production defaults
 * (30 calls a minute): abuse by one address leaves the others' queries alone, junk cannot evict a held
 * answer, a failing currency list does not cascade, and fault cases in a row each get their own status.
 * The finding-by-finding reproductions: rates-abuse.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CoinGeckoEmulator, type FaultMode, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import type { TestApp } from "../../support/app.ts"
import { askFrom, sendJunk, shapeCycling, startRatesApp } from "./rates-abuse-support.ts"

const NOW = Date.UTC(2026, 10, 22, 10, 30)
let emulator: CoinGeckoEmulator
const apps: Array<TestApp> = []

beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
})
afterAll(async () => {
  for (const app of apps) await app.close()
  await emulator.close()
})

const started = async (app: Promise<TestApp>) => {
  const ready = await app
  apps.push(ready)
  return ready
}
const abuser = "198.51.100.66"

describe("issue 13, done when", () => {
  it("holds under abuse and faults, with the default budget", async () => {
    // 1. One address: 30 junk requests and 25 shape-cycling ones; then three others' cold queries.
    const app = await started(startRatesApp(emulator))
    const junk = await sendJunk(app, abuser, 30)
    expect(new Set(junk)).toEqual(new Set([400]))
    const shapes: Array<number> = []
    for (const body of shapeCycling(25)) shapes.push((await askFrom(app, abuser, body)).status)
    const afterAbuse = emulator.stats()
    const others = await Promise.all([["SOL"], ["ADA", "DOT"], ["PEPE"]].map((cryptos, i) =>
      askFrom(app, `203.0.113.${i + 1}`, { cryptos, currency: "eur", days: 30 })
    ))
    expect(others.map((a) => a.status)).toEqual([200, 200, 200])
    for (const answer of others) expect(answer.ms).toBeLessThan(10_000)
    console.info(
      `abuse: junk ${JSON.stringify(junk.slice(0, 3))}…, shapes ${JSON.stringify(shapes)}; upstream after abuse ${afterAbuse.total} calls`
        + ` ${JSON.stringify(afterAbuse.byPath)}; others ${others.map((a) => `${a.status} in ${Math.round(a.ms)} ms`).join(", ")}`
    )

    // 2. 160 junk requests, an upstream outage: a query held before is still answered.
    expect(new Set(await sendJunk(app, abuser, 160))).toEqual(new Set([400]))
    emulator.setFault("5xx")
    const held = await askFrom(app, "203.0.113.1", { cryptos: ["SOL"], currency: "eur", days: 30 })
    expect(held.status).toBe(200)
    expect(held.body.rates).toEqual(others[0]!.body.rates)
    emulator.setFault("none")

    // 3. The currency list failing since start-up: 20 requests for a coin, then real queries.
    emulator.setFault({ mode: "5xx", paths: ["/simple/supported_vs_currencies"] })
    emulator.resetStats()
    const listless = await started(startRatesApp(emulator))
    const twenty = []
    for (let i = 0; i < 20; i++) twenty.push(await askFrom(listless, "198.51.100.7", { cryptos: ["BTC"], days: 30 }))
    expect(twenty.map((a) => a.status)).toEqual(Array(20).fill(200))
    const listCalls = emulator.stats().byPath["/simple/supported_vs_currencies"] ?? 0
    expect(listCalls).toBeLessThanOrEqual(3)
    const real = await Promise.all(["ETH", "XRP", "LTC"].map((coin, i) => askFrom(listless, `203.0.113.${i + 10}`, { cryptos: [coin] })))
    expect(real.map((a) => a.status)).toEqual([200, 200, 200])
    console.info(`currency list down: ${listCalls} calls to it for 20 requests; upstream ${JSON.stringify(emulator.stats().byPath)}`)
    emulator.setFault("none")

    // 4. Fault cases one after another, on cold coins: each its own status.
    const faulty = await started(startRatesApp(emulator))
    expect((await askFrom(faulty, "198.51.100.8", { cryptos: ["BTC"] })).status).toBe(200)
    const cases: ReadonlyArray<readonly [FaultMode, string, number]> = [
      ["5xx", "XRP", 502],
      ["reset", "ADA", 502],
      ["truncated", "DOT", 502],
      ["wrong-shape", "LTC", 502],
      ["429", "LINK", 503]
    ]
    const statuses: Array<number> = []
    for (const [mode, coin] of cases) {
      emulator.setFault(mode)
      const answer = await askFrom(faulty, "198.51.100.8", { cryptos: [coin], currency: "eur" })
      emulator.setFault("none")
      statuses.push(answer.status)
      expect(answer.ms).toBeLessThan(10_000)
      if (answer.status === 503) expect(Number(answer.retryAfter)).toBeGreaterThan(0)
    }
    expect(statuses).toEqual(cases.map(([, , status]) => status))
  }, 120_000)
})
