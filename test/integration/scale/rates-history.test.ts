/**
 * The kept history of daily points (issue 21, C4 "Over a month"), with real processes against the
 * emulator on its real clock: a restart on the same DATA_DIR, and a second instance on the same
 * PostgreSQL database, serve what was fetched before while CoinGecko fails on every call, and ask it
 * for none of the series they hold.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { type ServiceProcess, spawnService, tempDataDir } from "../../support/spawn.ts"
import { freshDatabase } from "../../support/privateServers.ts"

let emulator: CoinGeckoEmulator
const running: Array<ServiceProcess> = []
beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1" })
})
afterAll(() => emulator?.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.resetStats()
})
afterEach(async () => {
  await Promise.all(running.splice(0).map((service) => service.stop("SIGKILL")))
})

const start = async (env: Record<string, string>) => {
  const service = await spawnService({ COINGECKO_BASE_URL: emulator.url, RATE_LIMIT_RATES_PER_MIN: "100000", ...env })
  running.push(service)
  return service
}

const queries = [
  { cryptos: ["BTC", "ETH", "SOL"], days: 7 },
  { cryptos: ["BTC"], days: 30 },
  { cryptos: ["BTC", "ETH"], currency: "eur", days: 30 }
]

interface Answer {
  readonly status: number
  readonly series: Record<string, Array<[number, number]>>
}

const ask = async (service: ServiceProcess, query: unknown): Promise<Answer> => {
  const response = await fetch(`${service.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(query),
    signal: AbortSignal.timeout(15_000)
  })
  const body = await response.json() as { rates?: Array<{ id: string; series: Array<[number, number]> }> }
  return { status: response.status, series: Object.fromEntries((body.rates ?? []).map((rate) => [rate.id, rate.series])) }
}

const askAll = async (service: ServiceProcess) => {
  const answers: Array<Answer> = []
  for (const query of queries) answers.push(await ask(service, query))
  return answers
}

/** Series calls the emulator saw (market_chart and market_chart/range), by path. */
const seriesCalls = () => Object.fromEntries(Object.entries(emulator.stats().byPath).filter(([path]) => /\/market_chart(\/range)?$/.test(path)))

const expectFull = (answers: ReadonlyArray<Answer>) => {
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200])
  expect(answers.map((a) => Object.fromEntries(Object.entries(a.series).map(([id, s]) => [id, s.length])))).toEqual([
    { bitcoin: 7, ethereum: 7, solana: 7 },
    { bitcoin: 30 },
    { bitcoin: 30, ethereum: 30 }
  ])
}

describe("the rates history outlives the process", () => {
  it("a restart on the same DATA_DIR answers the held queries in full while CoinGecko fails, and asks it for no series", async () => {
    const dataDir = tempDataDir()
    const first = await start({ DATA_DIR: dataDir })
    const before = await askAll(first)
    expectFull(before)
    // One range call per coin and currency: btc, eth, sol in usd; btc, eth in eur.
    expect(Object.values(seriesCalls()).reduce((a, b) => a + b, 0)).toBe(5)
    expect(await first.stop()).toBe(0)

    emulator.setFault({ mode: "5xx", status: 503 })
    emulator.resetStats()
    const second = await start({ DATA_DIR: dataDir })
    const after = await askAll(second)
    expectFull(after)
    expect(after.map((a) => a.series)).toEqual(before.map((a) => a.series))
    expect(seriesCalls()).toEqual({})
  }, 60_000)

  it("two instances on one PostgreSQL database: what one fetched, the other serves with CoinGecko down", async () => {
    const database = await freshDatabase()
    try {
      const a = await start({ DATABASE_URL: database.url })
      const fetched = await askAll(a)
      expectFull(fetched)

      emulator.setFault({ mode: "5xx", status: 503 })
      emulator.resetStats()
      // Its own DATA_DIR (spawnService makes one): nothing shared on disk.
      const b = await start({ DATABASE_URL: database.url })
      const served = await askAll(b)
      expectFull(served)
      expect(served.map((x) => x.series)).toEqual(fetched.map((x) => x.series))
      expect(seriesCalls()).toEqual({})
    } finally {
      await Promise.all(running.splice(0).map((service) => service.stop("SIGKILL")))
      await database.drop()
    }
  }, 60_000)
})
