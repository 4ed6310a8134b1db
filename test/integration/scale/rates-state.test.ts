/**
 * Issue 27, the rates capability's state under faults, reproduced as an operator would (real processes,
 * the service as `npm start` runs it, against the CoinGecko emulator):
 *   1. a store outage (four workers on a private Redis, Redis stopped, 100 requests for new pairs from 100
 *      addresses) spends at most the reserve's share plus the pace: here, nothing;
 *   2. a poisoned history (a PostgreSQL row set to NaN, a file's point set to -1) never reaches a caller:
 *      the day is asked again, the answer is 200 with the source's price, and the bad value is replaced;
 *   4. a small plan's start-up (four workers, an empty Redis, 1,000 credits a month) loads the coin index
 *      once, and a symbol only the index knows resolves within a minute on every worker.
 * Each prints its figures (calls, statuses) for the issue's closing note.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { curatedCoins } from "../../../src/rates/symbols.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { emulatedCoinById, emulatedCurrencies, emulatedPrice } from "../../emulators/coingecko-data.ts"
import { startRedisOnFreePort } from "../../support/redis.ts"
import { type ServiceProcess, spawnService, tempDataDir } from "../../support/spawn.ts"
import { freshDatabase, runSql } from "../../support/privateServers.ts"

const NOW = Date.UTC(2026, 10, 22, 10)
const DAY = 86_400_000
const running: Array<ServiceProcess> = []
let emulator: CoinGeckoEmulator
beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: NOW })
})
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop("SIGKILL")))
  await emulator.close()
})

/** The service as deployed, against the emulator, CoinGecko alone. */
const start = async (env: Record<string, string>) => {
  const service = await spawnService({
    COINGECKO_BASE_URL: emulator.url,
    RATES_FALLBACK: "none",
    TRUST_PROXY: "true",
    RATE_LIMIT_RATES_PER_MIN: "1000000",
    DATA_DIR: tempDataDir(),
    ...env
  }, 30_000)
  running.push(service)
  return service
}

const ask = (service: ServiceProcess, body: unknown, address = "198.51.100.1") =>
  fetch(`${service.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": address, connection: "close" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000)
  }).then(async (res) => ({ status: res.status, body: (await res.json()) as any }), (error) => ({ status: 0, body: String(error) as any }))

/** CoinGecko's data calls (prices and points) made since the last reset. */
const dataCalls = () => {
  const stats = emulator.stats()
  return (stats.byQuery["markets:ids"] ?? 0) + Object.entries(stats.byPath).filter(([path]) => path.endsWith("/market_chart/range")).reduce((n, [, c]) => n + c, 0)
}

const count = (statuses: ReadonlyArray<number>) => {
  const byStatus: Record<number, number> = {}
  for (const status of statuses) byStatus[status] = (byStatus[status] ?? 0) + 1
  return byStatus
}

describe("a store outage spends at most the reserve's share plus the pace (finding 1)", () => {
  it("four workers on Redis, Redis stopped, 100 requests for new pairs from 100 addresses", async () => {
    const { child: redis, port } = await startRedisOnFreePort()
    try {
      const service = await start({ WEB_CONCURRENCY: "4", REDIS_URL: `redis://127.0.0.1:${port}`, COINGECKO_CALLS_PER_MONTH: "1000" })
      expect((await ask(service, { cryptos: ["BTC"], days: 3 })).status).toBe(200)
      redis.kill("SIGKILL")
      await new Promise((resolve) => setTimeout(resolve, 500))
      emulator.resetStats()
      const pairs = [...curatedCoins.values()].filter((coin) => emulatedCoinById.has(coin.id)).flatMap((coin) =>
        [...emulatedCurrencies.keys()].map((currency) => ({ coin, currency }))
      ).filter(({ coin, currency }) => !(coin.id === "bitcoin" && currency === "usd")).slice(0, 100)
      const started = performance.now()
      const statuses: Array<number> = []
      for (let i = 0; i < pairs.length; i += 10) {
        const batch = await Promise.all(pairs.slice(i, i + 10).map(({ coin, currency }, j) =>
          ask(service, { cryptos: [[...curatedCoins].find(([, c]) => c === coin)![0]], currency, days: 3 }, `203.0.113.${i + j}`)
        ))
        statuses.push(...batch.map((answer) => answer.status))
      }
      const seconds = (performance.now() - started) / 1000
      const calls = dataCalls()
      console.log(`store outage: ${pairs.length} requests in ${seconds.toFixed(1)} s: ${calls} CoinGecko data calls; answers ${JSON.stringify(count(statuses))}`)
      // Plan 1,000: a reserve of 20, a pace of 0.022 a minute; without the store a worker starts empty.
      expect(calls).toBeLessThanOrEqual(1)
      expect(statuses.every((status) => status === 200 || status === 503)).toBe(true)
    } finally {
      redis.kill("SIGKILL")
    }
  }, 120_000)
})

describe("a poisoned history never reaches a caller (finding 2)", () => {
  const day = Math.floor(NOW / DAY) * DAY - 5 * DAY
  const expectHealed = (answer: { status: number; body: any }) => {
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    const point = answer.body.rates[0].series.find(([t]: [number, number]) => t === day)
    expect(point?.[1]).toBe(emulatedPrice("bitcoin", "usd", day))
    expect(answer.body.stale).toBe(false)
  }

  it("PostgreSQL: a day's price set to NaN by hand is asked again and replaced", async () => {
    const database = await freshDatabase()
    try {
      const first = await start({ DATABASE_URL: database.url })
      expect((await ask(first, { cryptos: ["BTC"], days: 30 })).status).toBe(200)
      await first.stop("SIGTERM")
      await runSql(database.url, [`UPDATE rates_daily_points SET price = 'NaN' WHERE coin = 'bitcoin' AND currency = 'usd' AND day = DATE '1970-01-01' + ${day / DAY}`])
      const second = await start({ DATABASE_URL: database.url })
      const answer = await ask(second, { cryptos: ["BTC"], days: 30 })
      console.log(`poisoned row (NaN): ${answer.status} ${answer.body.code ?? `stale=${answer.body.stale}`}`)
      expectHealed(answer)
      const [rows] = await runSql(database.url, [`SELECT price FROM rates_daily_points WHERE coin = 'bitcoin' AND currency = 'usd' AND day = DATE '1970-01-01' + ${day / DAY}`])
      expect(rows).toEqual([{ price: emulatedPrice("bitcoin", "usd", day) }])
    } finally {
      await database.drop()
    }
  }, 60_000)

  it("files: a day's price set to -1 is asked again and replaced", async () => {
    const dataDir = tempDataDir()
    const first = await start({ DATA_DIR: dataDir })
    expect((await ask(first, { cryptos: ["BTC"], days: 30 })).status).toBe(200)
    await first.stop("SIGTERM")
    const file = join(dataDir, "rates-history", "coingecko", "usd", "bitcoin.json")
    const held = JSON.parse(readFileSync(file, "utf8")) as { points: Array<[number, number]> }
    held.points = held.points.map(([t, price]) => [t, t === day ? -1 : price])
    writeFileSync(file, JSON.stringify(held))
    const second = await start({ DATA_DIR: dataDir })
    const answer = await ask(second, { cryptos: ["BTC"], days: 30 })
    console.log(`poisoned file (-1): ${answer.status} stale=${answer.body.stale} point=${JSON.stringify(answer.body.rates?.[0]?.series.find(([t]: [number, number]) => t === day))}`)
    expectHealed(answer)
    const healed = JSON.parse(readFileSync(file, "utf8")) as { points: Array<[number, number]> }
    expect(healed.points.find(([t]) => t === day)?.[1]).toBe(emulatedPrice("bitcoin", "usd", day))
  }, 60_000)
})

describe("a small plan's start-up loads the coin index (finding 4)", () => {
  it("four workers, an empty Redis, 1,000 credits a month: a symbol only the index knows resolves within a minute", async () => {
    emulator.resetStats()
    // The coin list is over a megabyte upstream: slow enough that the four workers all start loading it.
    emulator.setLatency("/coins/list", 1_500)
    const prefix = `test-startup-${process.pid}-${Date.now()}:`
    const service = await start({
      WEB_CONCURRENCY: "4",
      REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      REDIS_KEY_PREFIX: prefix,
      COINGECKO_CALLS_PER_MONTH: "1000",
      COINGECKO_AUX_RETRY_MS: "1000"
    })
    const started = performance.now()
    const statuses: Array<number> = []
    // Each request on a new connection: the workers take turns.
    let inARow = 0
    while (inARow < 12 && performance.now() - started < 60_000) {
      const answer = await ask(service, { cryptos: ["PEPE"], days: 3 })
      statuses.push(answer.status)
      inARow = answer.status === 200 ? inARow + 1 : 0
      if (answer.status !== 200) await new Promise((resolve) => setTimeout(resolve, 500))
    }
    const seconds = (performance.now() - started) / 1000
    emulator.setLatency("/coins/list", 0)
    const lists = emulator.stats().byPath["/coins/list"] ?? 0
    console.log(`small plan start-up: PEPE ${inARow === 12 ? "answered 200 twelve times in a row" : "never answered 200 twelve times in a row"} after ${seconds.toFixed(1)} s; /coins/list called ${lists} times; answers ${JSON.stringify(count(statuses))}`)
    expect(inARow).toBe(12)
    expect(lists).toBe(1)
  }, 90_000)
})
