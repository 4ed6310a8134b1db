/**
 * Only missing days are fetched (issue 21, C4 "Over a month"), in process against the emulator, the
 * service on the emulator's clock (test/support/clock.ts), the history in files under a temp DATA_DIR:
 * a day later, one range call asks for the new day only; a new instance a day later with CoinGecko
 * down serves the held days marked stale; a history that cannot be read or written never fails a
 * request the upstream can serve, and is reported once.
 */
import { Effect, Exit, Layer, Logger, Scope } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { DailyHistory } from "../../../../src/rates/history/DailyHistory.ts"
import * as Rates from "../../../../src/rates/layer.ts"
import { RatesProvider, type RatesQuery } from "../../../../src/rates/RatesProvider.ts"
import { DAY_MS, emulatedPrice, startOfUtcDay } from "../../../emulators/coingecko-data.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../../emulators/coingecko.ts"
import { type MovableClock, movableClock } from "../../../support/clock.ts"
import { tempDataDir } from "../../../support/spawn.ts"
import { EMULATOR_NOW, fastEnv, healthyEnv } from "../../../support/rates.ts"

let emulator: CoinGeckoEmulator
beforeAll(async () => {
  emulator = await startCoinGeckoEmulator({ now: EMULATOR_NOW })
})
afterAll(() => emulator?.close())
beforeEach(() => {
  emulator.setFault("none")
  emulator.setNow(EMULATOR_NOW)
  emulator.resetStats()
})

const TODAY = startOfUtcDay(EMULATOR_NOW)

/** One instance: its own cache, on `clock`, keeping the history under `dataDir`; `logs` collects its warnings. */
const instance = (dataDir: string, clock: MovableClock, env = healthyEnv(emulator.url), warnings: Array<string> = []) =>
  Layer.mergeAll(
    Rates.layerTest({ env, history: DailyHistory.layerFiles(dataDir) }).pipe(Layer.provideMerge(clock.layer)),
    Logger.layer([Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn") warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
    })])
  )

/** Builds one instance, kept until `close`: its cache lives across its requests. */
const open = async (layer: Layer.Layer<RatesProvider, unknown>) => {
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  return {
    ask: (query: Partial<RatesQuery> & Pick<RatesQuery, "symbols">) =>
      Effect.runPromise(Effect.flatMap(Effect.service(RatesProvider), (rates) => rates.historical({ currency: "usd", days: 7, ...query })).pipe(
        Effect.map(({ result }) => result),
        Effect.provide(context)
      )),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** One request on an instance of its own. */
const ask = async (layer: Layer.Layer<RatesProvider, unknown>, query: Partial<RatesQuery> & Pick<RatesQuery, "symbols">) => {
  const service = await open(layer)
  try {
    return await service.ask(query)
  } finally {
    await service.close()
  }
}

const closes = (id: string, lastDay: number, days: number) =>
  Array.from({ length: days }, (_, i) => {
    const day = lastDay - (days - 1 - i) * DAY_MS
    return [day, emulatedPrice(id, "usd", day)]
  })

const seconds = (ms: number) => ms / 1000

describe("the series a day later", () => {
  it("asks for the new day only: one range call, not 365 days", async () => {
    const dataDir = tempDataDir()
    const clock = movableClock(EMULATOR_NOW)
    const service = await open(instance(dataDir, clock))
    const first = await service.ask({ symbols: ["BTC"] })
    expect(first.rates[0]!.series).toEqual(closes("bitcoin", TODAY, 7))
    const [cold] = emulator.stats().ranges
    expect(emulator.stats().ranges).toHaveLength(1)
    // The year of closes: from 364 days before today to today (an hour's margin either side).
    expect([cold!.from, cold!.to]).toEqual([seconds(TODAY - 364 * DAY_MS) - 3600, seconds(TODAY) + 3600])

    emulator.setNow(EMULATOR_NOW + DAY_MS)
    clock.advance(DAY_MS)
    emulator.resetStats()
    const next = await service.ask({ symbols: ["BTC"] })
    await service.close()
    expect(next.rates[0]!.series).toEqual(closes("bitcoin", TODAY + DAY_MS, 7))
    expect(next.stale).toBe(false)
    expect(emulator.stats().ranges).toEqual([
      { path: "/coins/bitcoin/market_chart/range", from: seconds(TODAY + DAY_MS) - 3600, to: seconds(TODAY + DAY_MS) + 3600 }
    ])
    expect(emulator.stats().byPath["/coins/bitcoin/market_chart"]).toBeUndefined()
  }, 30_000)

  it("a cold series late in the UTC day stays within the Demo plan's 365 days", async () => {
    const late = TODAY + 23 * 3_600_000 + 55 * 60_000
    emulator.setNow(late)
    const answer = await ask(instance(tempDataDir(), movableClock(late)), { symbols: ["SOL"], days: 365 })
    expect(answer.rates[0]!.series.at(-1)).toEqual([TODAY, emulatedPrice("solana", "usd", TODAY)])
    const [asked] = emulator.stats().ranges
    expect(asked!.from).toBeGreaterThanOrEqual(seconds(late - 365 * DAY_MS))
  }, 30_000)

  it("a new instance with CoinGecko down serves the held days, stale, when the newest is missing", async () => {
    const dataDir = tempDataDir()
    await ask(instance(dataDir, movableClock(EMULATOR_NOW)), { symbols: ["ETH"], days: 30 })

    emulator.setNow(EMULATOR_NOW + DAY_MS)
    emulator.setFault({ mode: "5xx", status: 503 })
    emulator.resetStats()
    const later = await ask(instance(dataDir, movableClock(EMULATOR_NOW + DAY_MS), fastEnv(emulator.url)), { symbols: ["ETH"], days: 30 })
    expect(later.stale).toBe(true)
    const held = closes("ethereum", TODAY, 30)
    expect(later.rates[0]!.series).toEqual(held)
    // It did ask for the one missing day (and failed): nothing more.
    expect(emulator.stats().ranges.every((range) => range.from === seconds(TODAY + DAY_MS) - 3600)).toBe(true)
  }, 30_000)

  it("a history that cannot be used never fails a request the upstream can serve, and is reported once", async () => {
    const dataDir = tempDataDir()
    // A file where the history's folder should be: every read and write fails.
    writeFileSync(join(dataDir, "rates-history"), "not a folder")
    const warnings: Array<string> = []
    const layer = instance(dataDir, movableClock(EMULATOR_NOW), healthyEnv(emulator.url), warnings)
    const answer = await ask(layer, { symbols: ["BTC", "ETH", "SOL"] })
    expect(answer.stale).toBe(false)
    expect(answer.rates.map((rate) => rate.series)).toEqual([
      closes("bitcoin", TODAY, 7),
      closes("ethereum", TODAY, 7),
      closes("solana", TODAY, 7)
    ])
    expect(warnings.filter((warning) => /rates history unavailable/.test(warning))).toHaveLength(1)
  }, 30_000)
})
