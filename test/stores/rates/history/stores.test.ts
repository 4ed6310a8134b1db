/**
 * The three `DailyHistory` stores behave alike (src/rates/history): nothing held at first; a write
 * widens the coverage to the hull of held and new; a day already held keeps its first price; series
 * are apart per coin, currency and source. The file store reads a broken file as nothing held (one
 * warning) and replaces it on the next write; PostgreSQL keeps what one pool wrote for another.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Exit, Layer, Logger, Option, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../../../src/config/AppConfig.ts"
import { DailyHistory, type HeldSeries } from "../../../../src/rates/history/DailyHistory.ts"
import { historyFile } from "../../../../src/rates/history/fileStore.ts"
import { configFrom } from "../../../support/config.ts"
import { tempDataDir } from "../../../support/spawn.ts"
import { freshDatabase, runSql } from "../../../support/privateServers.ts"

const DAY = 86_400_000
const D0 = Date.UTC(2026, 10, 1)
const day = (n: number) => D0 + n * DAY
const series = (from: number, to: number, points: ReadonlyArray<readonly [number, number]>): HeldSeries => ({
  coveredFrom: day(from),
  coveredTo: day(to),
  points: points.map(([n, price]) => [day(n), price] as const)
})

/** Runs `f` with a store built from `layer` in its own scope, closed after. */
const withStore = async <A>(layer: Layer.Layer<DailyHistory, unknown>, f: (store: DailyHistory["Service"]) => Effect.Effect<A, unknown>) => {
  const scope = await Effect.runPromise(Scope.make())
  try {
    const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
    return await Effect.runPromise(Effect.flatMap(Effect.service(DailyHistory), f).pipe(Effect.provide(context)))
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

let database: Awaited<ReturnType<typeof freshDatabase>>
beforeAll(async () => {
  database = await freshDatabase()
}, 30_000)
afterAll(async () => {
  await database?.drop()
})

const layerFiles = DailyHistory.layerFiles
const postgres = () => DailyHistory.layerPostgres.pipe(Layer.provide(AppConfig.layer), Layer.provide(configFrom({ DATABASE_URL: database.url })))
const stores: ReadonlyArray<readonly [string, () => Layer.Layer<DailyHistory, unknown>]> = [
  ["memory", () => DailyHistory.layerMemory],
  ["files under DATA_DIR", () => layerFiles(tempDataDir())],
  ["PostgreSQL", postgres]
]

describe.each(stores)("DailyHistory in %s", (name, makeLayer) => {
  it("holds nothing at first, then the hull of the coverages, the first price of a day, each series apart", async () => {
    const coin = `bitcoin-${name.length}-${Math.random().toString(36).slice(2, 8)}`
    const held = await withStore(makeLayer(), (store) =>
      Effect.gen(function*() {
        expect(Option.isNone(yield* store.read({ coin: coin, currency: "usd", source: "coingecko" }))).toBe(true)
        yield* store.write({ coin: coin, currency: "usd", source: "coingecko" }, series(10, 14, [[10, 1], [11, 2], [14, 5]]))
        // Adjacent after, overlapping day 14 with another price: day 14 keeps its first price.
        yield* store.write({ coin: coin, currency: "usd", source: "coingecko" }, series(14, 16, [[14, 99], [15, 6], [16, 7]]))
        // Adjacent before, a day without a point (a coin not yet listed).
        yield* store.write({ coin: coin, currency: "usd", source: "coingecko" }, series(7, 9, [[9, 0.5]]))
        // Other series: another currency, another source.
        yield* store.write({ coin: coin, currency: "eur", source: "coingecko" }, series(1, 2, [[1, 42]]))
        yield* store.write({ coin: coin, currency: "usd", source: "coinbase" }, series(3, 3, [[3, 43]]))
        return {
          usd: yield* store.read({ coin: coin, currency: "usd", source: "coingecko" }),
          eur: yield* store.read({ coin: coin, currency: "eur", source: "coingecko" }),
          coinbase: yield* store.read({ coin: coin, currency: "usd", source: "coinbase" }),
          other: yield* store.read({ coin: "ethereum", currency: "usd", source: "coingecko" })
        }
      }))
    expect(held.usd).toEqual(Option.some(series(7, 16, [[9, 0.5], [10, 1], [11, 2], [14, 5], [15, 6], [16, 7]])))
    expect(held.eur).toEqual(Option.some(series(1, 2, [[1, 42]])))
    expect(held.coinbase).toEqual(Option.some(series(3, 3, [[3, 43]])))
    expect(Option.isNone(held.other)).toBe(true)
  })
})

describe("DailyHistory durability", () => {
  it("files: a new store on the same DATA_DIR reads what the last one wrote", async () => {
    const dir = tempDataDir()
    await withStore(layerFiles(dir), (store) => store.write({ coin: "ethereum", currency: "eur", source: "coingecko" }, series(0, 2, [[0, 1], [1, 2], [2, 3]])))
    const again = await withStore(layerFiles(dir), (store) => store.read({ coin: "ethereum", currency: "eur", source: "coingecko" }))
    expect(again).toEqual(Option.some(series(0, 2, [[0, 1], [1, 2], [2, 3]])))
    expect(JSON.parse(readFileSync(join(dir, "rates-history", "coingecko", "eur", "ethereum.json"), "utf8"))).toMatchObject({ version: 1 })
  })

  it("files: ids that are not plain names never leave the history folder", () => {
    const dir = tempDataDir()
    for (const id of ["../../etc/passwd", "..", "a/b", "Ünïcode", "x".repeat(300)]) {
      const file = historyFile(dir, { coin: id, currency: "usd", source: "coingecko" })
      expect(file.startsWith(join(dir, "rates-history", "coingecko", "usd") + "/")).toBe(true)
      expect(file.slice(join(dir, "rates-history", "coingecko", "usd").length + 1)).toMatch(/^_[0-9a-f]{32}\.json$/)
    }
  })

  it("files: a broken file is nothing held, with one warning, and the next write replaces it", async () => {
    const dir = tempDataDir()
    const file = historyFile(dir, { coin: "solana", currency: "usd", source: "coingecko" })
    mkdirSync(join(dir, "rates-history", "coingecko", "usd"), { recursive: true })
    writeFileSync(file, `{"version":1,"coveredFrom":`)
    const warnings: Array<string> = []
    const logger = Logger.layer([Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn") warnings.push(String(message))
    })])
    const held = await withStore(Layer.merge(layerFiles(dir), logger), (store) =>
      Effect.gen(function*() {
        const first = yield* store.read({ coin: "solana", currency: "usd", source: "coingecko" })
        const second = yield* store.read({ coin: "solana", currency: "usd", source: "coingecko" })
        yield* store.write({ coin: "solana", currency: "usd", source: "coingecko" }, series(5, 6, [[5, 150]]))
        return { first, second, after: yield* store.read({ coin: "solana", currency: "usd", source: "coingecko" }) }
      }))
    expect(Option.isNone(held.first)).toBe(true)
    expect(Option.isNone(held.second)).toBe(true)
    expect(warnings.filter((w) => /unreadable/.test(w))).toHaveLength(1)
    expect(held.after).toEqual(Option.some(series(5, 6, [[5, 150]])))
    // Well-formed JSON whose coverage is not two days in order is broken too.
    writeFileSync(file, JSON.stringify({ version: 1, coveredFrom: day(6), coveredTo: day(5), points: [] }))
    expect(Option.isNone(await withStore(layerFiles(dir), (store) => store.read({ coin: "solana", currency: "usd", source: "coingecko" })))).toBe(true)
  })

  it("PostgreSQL: a second pool reads what the first wrote; the tables hold one row per day", async () => {
    await withStore(postgres(), (store) => store.write({ coin: "cardano", currency: "usd", source: "coingecko" }, series(0, 3, [[0, 0.4], [1, 0.41], [3, 0.43]])))
    const again = await withStore(postgres(), (store) =>
      Effect.gen(function*() {
        yield* store.write({ coin: "cardano", currency: "usd", source: "coingecko" }, series(3, 4, [[3, 9], [4, 0.44]]))
        return yield* store.read({ coin: "cardano", currency: "usd", source: "coingecko" })
      }))
    expect(again).toEqual(Option.some(series(0, 4, [[0, 0.4], [1, 0.41], [3, 0.43], [4, 0.44]])))
    const [rows] = await runSql(database.url, [
      `SELECT (SELECT count(*)::int FROM rates_daily_points WHERE coin = 'cardano') AS points,
        (SELECT count(*)::int FROM rates_daily_coverage WHERE coin = 'cardano') AS coverage`
    ])
    expect(rows).toEqual([{ points: 4, coverage: 1 }])
  })
})

describe("every store read validated the same way (issue 27, finding 2)", () => {
  /** What a tampered store holds for bitcoin in usd: days 0..4, day 2 set to `bad`. */
  const tampered = {
    files: (dir: string, bad: unknown) => {
      const file = historyFile(dir, { coin: "bitcoin", currency: "usd", source: "coingecko" })
      mkdirSync(join(dir, "rates-history", "coingecko", "usd"), { recursive: true })
      writeFileSync(file, JSON.stringify({ version: 1, coveredFrom: day(0), coveredTo: day(4), points: [[day(0), 1], [day(1), 2], [day(2), bad], [day(3), 4], [day(4), 5]] }))
    }
  }
  const warningsOf = () => {
    const warnings: Array<string> = []
    const layer = Logger.layer([Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn") warnings.push(String(message))
    })])
    return { warnings, layer }
  }

  it("files: a day that is no positive price ends the coverage before it (asked again), once logged; a write replaces it", async () => {
    for (const bad of [-1, 0, "NaN", null, 1e400]) {
      const dir = tempDataDir()
      tampered.files(dir, bad)
      const log = warningsOf()
      const held = await withStore(Layer.merge(DailyHistory.layerFiles(dir), log.layer), (store) =>
        Effect.gen(function*() {
          const id = { coin: "bitcoin", currency: "usd", source: "coingecko" } as const
          const first = yield* store.read(id)
          yield* store.read(id)
          // The day asked again and written: the bad value is replaced (the first write won nothing).
          yield* store.write(id, series(2, 4, [[2, 3], [3, 4], [4, 5]]))
          return { first, after: yield* store.read(id) }
        }))
      expect(held.first, String(bad)).toEqual(Option.some(series(0, 1, [[0, 1], [1, 2]])))
      expect(log.warnings.filter((w) => /not a positive price/.test(w)), String(bad)).toHaveLength(1)
      expect(held.after, String(bad)).toEqual(Option.some(series(0, 4, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])))
    }
  })

  it("PostgreSQL: a price set to NaN or -1 by hand ends the coverage before it; the next write replaces it", async () => {
    const id = { coin: `poisoned-${Math.random().toString(36).slice(2, 8)}`, currency: "usd", source: "coingecko" } as const
    await withStore(postgres(), (store) => store.write(id, series(0, 4, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])))
    for (const bad of ["'NaN'", "-1"]) {
      await runSql(database.url, [`UPDATE rates_daily_points SET price = ${bad} WHERE coin = '${id.coin}' AND day = DATE '1970-01-01' + ${day(2) / DAY}`])
      const held = await withStore(postgres(), (store) =>
        Effect.gen(function*() {
          const first = yield* store.read(id)
          yield* store.write(id, series(2, 4, [[2, 3], [3, 4], [4, 5]]))
          return { first, after: yield* store.read(id) }
        }))
      expect(held.first, bad).toEqual(Option.some(series(0, 1, [[0, 1], [1, 2]])))
      expect(held.after, bad).toEqual(Option.some(series(0, 4, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])))
    }
  })

  it("a coverage beyond the last closed day (a clock that ran ahead wrote it) ends at that day", async () => {
    const dir = tempDataDir()
    const today = Math.floor(Date.now() / DAY) * DAY
    const file = historyFile(dir, { coin: "bitcoin", currency: "usd", source: "coingecko" })
    mkdirSync(join(dir, "rates-history", "coingecko", "usd"), { recursive: true })
    writeFileSync(file, JSON.stringify({ version: 1, coveredFrom: today - 3 * DAY, coveredTo: today + 2 * DAY, points: [[today - 3 * DAY, 1], [today + DAY, 9]] }))
    const held = await withStore(DailyHistory.layerFiles(dir), (store) => store.read({ coin: "bitcoin", currency: "usd", source: "coingecko" }))
    expect(Option.getOrThrow(held).coveredTo).toBeLessThanOrEqual(today)
    expect(Option.getOrThrow(held).points).toEqual([[today - 3 * DAY, 1]])
  })
})
