/**
 * The kept history of daily points (CONTRACT C4 "Over a month"): a closed day's point never changes,
 * so it is fetched once, stored durably and shared by every instance; only days outside what is held
 * are asked of a source again (keptSeries.ts).
 *
 * Per series (coin, currency, source): the days held, and the range of days already asked of the
 * source (`coveredFrom`..`coveredTo`), with or without a point (a coin listed later has none before).
 *
 * One service over three stores (memory, files under DATA_DIR, PostgreSQL with DATABASE_URL), each only
 * keeping and handing back (dailySeries.ts `SeriesStore`): what any store hands back is validated here, the same way,
 * so a day that is not a positive price at 00:00 UTC never reaches an answer, whoever wrote it.
 */
import { Clock, Context, Data, Effect, Layer, Option } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { AppConfig } from "../../config/AppConfig.ts"
import { Database, reasonOf } from "../../database/Database.ts"
import { recordBadHistoryDays } from "../../observability/metrics.ts"
import type { FileError } from "../../platform/files.ts"
import type { StartupFailure } from "../../lifecycle/StartupFailure.ts"
import { type HeldSeries, lastPublishedDay, type SeriesId, type SeriesStore, seriesKey, validSeries } from "../dailySeries.ts"
import type { SourceName } from "../upstream.ts"
import { makeFileStore } from "./fileStore.ts"
import { makeMemoryStore } from "./memoryStore.ts"
import { makePostgresStore } from "./postgresStore.ts"

export type { HeldSeries } from "../dailySeries.ts"

/** The history could not be read or written (a file, PostgreSQL). Never holds data or the URL. */
export class HistoryError extends Data.TaggedError("HistoryError")<{
  readonly operation: string
  readonly reason: string
}> {
  override get message() {
    return `rates history: ${this.operation}: ${this.reason}`
  }
}

export interface DailyHistoryShape {
  readonly read: (id: SeriesId<SourceName>) => Effect.Effect<Option.Option<HeldSeries>, HistoryError>
  /** Adds days: coverage becomes the hull of the held and the new; a day already held is kept as is (first write wins). */
  readonly write: (id: SeriesId<SourceName>, series: HeldSeries) => Effect.Effect<void, HistoryError>
}

/** Series already reported, at most this many (then forgotten at once). */
const REPORTED_CAPACITY = 1_000

/**
 * A store behind the one validation, its failures as `HistoryError`. Each read and write is one
 * generator: it calls the store and the validation (dailySeries.ts) and resumes here, no callback of
 * this file entered in between.
 */
const validated = <E>(store: SeriesStore<E>, reasonOf: (error: E) => string): DailyHistoryShape => {
  const reported = new Set<string>()
  function* reportOnce(id: SeriesId, line: string, detail: string) {
    const key = seriesKey(id)
    if (reported.has(key)) return
    if (reported.size >= REPORTED_CAPACITY) reported.clear()
    reported.add(key)
    yield* Effect.logWarning(line, detail).pipe(Effect.annotateLogs({ series: key }))
  }
  const readingFailed = (error: E) => new HistoryError({ operation: "reading", reason: reasonOf(error) })
  const writingFailed = (error: E) => new HistoryError({ operation: "writing", reason: reasonOf(error) })
  return {
    read: (id) =>
      Effect.gen(function*() {
        const stored = yield* Effect.mapError(store.read(id), readingFailed)
        if (stored === undefined) return Option.none()
        const valid = validSeries(stored, lastPublishedDay(yield* Clock.currentTimeMillis))
        if (valid === undefined) {
          yield* reportOnce(id, "rates history: unreadable series, taken as nothing held; the next fetch replaces it", "no coverage")
          return Option.none()
        }
        if (valid.dropped.length > 0) {
          recordBadHistoryDays(id.source, valid.dropped.length)
          yield* reportOnce(id, "rates history: days that are not a positive price at 00:00 UTC up to the last closed day, asked again", valid.dropped.slice(0, 5).join(", "))
        }
        return Option.some(valid.series)
      }),
    write: (id, series) =>
      Effect.gen(function*() {
        const valid = validSeries(series, lastPublishedDay(yield* Clock.currentTimeMillis))
        if (valid !== undefined) yield* Effect.mapError(store.write(id, valid.series), writingFailed)
      })
  }
}

export class DailyHistory extends Context.Service<DailyHistory, DailyHistoryShape>()("app/rates/DailyHistory") {
  /** In memory: one process, gone with it (tests, which may keep this handle to read what was kept). */
  static readonly makeMemory = (): DailyHistoryShape => validated(makeMemoryStore(), () => "never")

  static readonly layerMemory: Layer.Layer<DailyHistory> = Layer.sync(DailyHistory, DailyHistory.makeMemory)

  /** One file per series under `dataDir` (rates-history/). */
  static readonly layerFiles = (dataDir: string): Layer.Layer<DailyHistory> =>
    Layer.sync(DailyHistory, () => validated(makeFileStore(dataDir), (error: FileError) => error.message))

  /** In PostgreSQL, on the process's one pool (`Database.layer`, built once whoever provides it). */
  static readonly layerPostgres: Layer.Layer<DailyHistory, StartupFailure, AppConfig> = Layer.effect(
    DailyHistory,
    Effect.map(Database, (database) => validated(makePostgresStore(database), (error: SqlError) => `PostgreSQL: ${reasonOf(error)}`))
  ).pipe(Layer.provide(Database.layer))

  /** Where it lives (CONTRACT C2, C4): PostgreSQL with DATABASE_URL (every instance shares it), else files under DATA_DIR. */
  static readonly layer: Layer.Layer<DailyHistory, StartupFailure, AppConfig> = Layer.unwrap(
    Effect.map(AppConfig, ({ dataDir, databaseUrl }) => (databaseUrl === undefined ? DailyHistory.layerFiles(dataDir) : DailyHistory.layerPostgres))
  )
}
