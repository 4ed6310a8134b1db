/**
 * The kept history of daily points (CONTRACT C4): a closed day never changes, so it is fetched once and shared; sources
 * are asked only for days not held nor asked before, so held days serve while a source is down. Store reads are validated
 * here, whoever wrote. Reads and writes are generators, not callbacks: each crosses into a store once.
 */
import { Clock, Context, Data, Effect, Layer, Option, Result } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { AppConfig } from "../../config/AppConfig.ts"
import { Database, reasonOf } from "../../database/Database.ts"
import { recordBadHistoryDays } from "../../observability/metrics.ts"
import type { FileError } from "../../platform/files.ts"
import type { StartupFailure } from "../../lifecycle/StartupFailure.ts"
import { type DailyPoint, type DayRange, type HeldSeries, lastPublishedDay, missingRanges, neededDays, pointsWithin, type SeriesId, type SeriesStore, seriesKey, validSeries } from "../dailySeries.ts"
import type { SourceError, SourceName } from "../upstream.ts"
import { makeFileStore } from "./fileStore.ts"
import { makeMemoryStore } from "./memoryStore.ts"
import { makePostgresStore } from "./postgresStore.ts"

export type { HeldSeries } from "../dailySeries.ts"

/** Never holds data or the URL. */
class HistoryError extends Data.TaggedError("HistoryError")<{
  readonly operation: string
  readonly reason: string
}> {
  override get message() {
    return `rates history: ${this.operation}: ${this.reason}`
  }
}

export interface DailyHistoryShape {
  readonly read: (id: SeriesId<SourceName>) => Effect.Effect<Option.Option<HeldSeries>, HistoryError>
  /** Coverage becomes the hull of the held and the new; a day already held is kept (first write wins). */
  readonly write: (id: SeriesId<SourceName>, series: HeldSeries) => Effect.Effect<void, HistoryError>
}

const REPORTED_CAPACITY = 1_000 // series reported; then all forgotten at once

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
  /** Tests may keep this handle to read what was kept. */
  static readonly makeMemory = (): DailyHistoryShape => validated(makeMemoryStore(), () => "never")
  static readonly layerMemory: Layer.Layer<DailyHistory> = Layer.sync(DailyHistory, DailyHistory.makeMemory)
  static readonly layerFiles = (dataDir: string): Layer.Layer<DailyHistory> =>
    Layer.sync(DailyHistory, () => validated(makeFileStore(dataDir), (error: FileError) => error.message))
  /** On the process's one pool (`Database.layer`, built once whoever provides it). */
  static readonly layerPostgres: Layer.Layer<DailyHistory, StartupFailure, AppConfig> = Layer.effect(
    DailyHistory,
    Effect.map(Database, (database) => validated(makePostgresStore(database), (error: SqlError) => `PostgreSQL: ${reasonOf(error)}`))
  ).pipe(Layer.provide(Database.layer))
  /** CONTRACT C2, C4: PostgreSQL with DATABASE_URL (every instance shares it), else files under DATA_DIR. */
  static readonly layer: Layer.Layer<DailyHistory, StartupFailure, AppConfig> = Layer.unwrap(
    Effect.map(AppConfig, ({ dataDir, databaseUrl }) => (databaseUrl === undefined ? DailyHistory.layerFiles(dataDir) : DailyHistory.layerPostgres))
  )
}

export interface SeriesOf {
  readonly coin: string
  readonly currency: string
}

/** A source's closes of the days of `range` (points at 00:00 UTC inside it), paid as `Spend` says. */
export type FetchCloses<S extends SeriesOf> = (series: S, range: DayRange, now: number) => Effect.Effect<ReadonlyArray<DailyPoint>, SourceError>

export interface KeptSeries<S extends SeriesOf> {
  /** The days needed at `now` (dailySeries.ts `neededDays`): held ones, the missing fetched and kept. */
  readonly fetch: (series: S) => Effect.Effect<ReadonlyArray<DailyPoint>, SourceError>
  /** For when the source cannot serve the rest; none when nothing of the need is held. */
  readonly held: (series: S) => Effect.Effect<Option.Option<ReadonlyArray<DailyPoint>>>
}

/** The store never fails a request the source can serve: a failed read is nothing held, a failed write is skipped; logged once until it works again. */
export const makeKeptSeries = <S extends SeriesOf>(
  history: DailyHistoryShape,
  source: SourceName,
  options: { readonly seriesDays: number; readonly closes: FetchCloses<S> }
): KeptSeries<S> => {
  let failing = false
  function* storeFailed(error: HistoryError) {
    if (failing) return
    failing = true
    yield* Effect.logWarning(`rates history unavailable; fetching from ${source} without it`, error.message)
  }
  function* readHeld({ coin, currency }: SeriesOf) {
    const read = yield* Effect.result(history.read({ coin, currency, source }))
    if (Result.isFailure(read)) {
      yield* storeFailed(read.failure)
      return undefined
    }
    if (failing) {
      failing = false
      yield* Effect.logInfo("rates history available again")
    }
    return Option.getOrUndefined(read.success)
  }
  const fetch = (series: S) =>
    Effect.gen(function*() {
      const { coin, currency } = series
      const now = yield* Clock.currentTimeMillis
      const held = yield* readHeld(series)
      const need = neededDays(now, options.seriesDays)
      const byDay = new Map<number, number>(held === undefined ? [] : pointsWithin(held.points, need))
      for (const range of missingRanges(held, need)) {
        const closes = yield* options.closes(series, range, now)
        for (const [day, price] of closes) if (!byDay.has(day)) byDay.set(day, price)
        const added = coveredBy(range, closes, need)
        if (added === undefined) continue
        const wrote = yield* Effect.result(history.write({ coin, currency, source }, added))
        if (Result.isFailure(wrote)) yield* storeFailed(wrote.failure)
      }
      return [...byDay].sort((a, b) => a[0] - b[0]).map(([day, price]): DailyPoint => [day, price] as const)
    })
  const held = (series: S) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const found = yield* readHeld(series)
      const points = found === undefined ? [] : pointsWithin(found.points, neededDays(now, options.seriesDays))
      return points.length === 0 ? Option.none() : Option.some(points)
    })
  return { fetch, held }
}

/** What a fetched range adds to the history; undefined when nothing is to be recorded. */
export const coveredBy = (range: DayRange, closes: ReadonlyArray<DailyPoint>, need: DayRange): HeldSeries | undefined => {
  const newest = closes.at(-1)?.[0]
  if (range.to < need.to || newest === range.to) return { coveredFrom: range.from, coveredTo: range.to, points: closes }
  return newest === undefined ? undefined : { coveredFrom: range.from, coveredTo: newest, points: closes }
}
