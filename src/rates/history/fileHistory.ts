/**
 * `DailyHistory` in files under DATA_DIR, one per series:
 * `DATA_DIR/rates-history/<source>/<currency>/<coin>.json` = `{"version":1,"coveredFrom":ms,"coveredTo":ms,
 * "points":[[ms,price],...]}`. A write is a read-merge-write under the file's lock (workers of one
 * DATA_DIR never lose each other's days) and an atomic replace (a reader never sees half a file).
 * A file that does not decode counts as nothing held (one warning per file); the next write replaces it.
 */
import { createHash } from "node:crypto"
import * as path from "node:path"
import { Effect, Layer, Option, Schema } from "effect"
import { type FileError, readTextIfExists, withFileLock, writeFileAtomic } from "../../platform/files.ts"
import { DailyHistory, type HeldSeries, HistoryError, type HistorySource, isWellFormed, mergeHeld } from "./DailyHistory.ts"

const HistoryFile = Schema.Struct({
  version: Schema.Literal(1),
  coveredFrom: Schema.Finite,
  coveredTo: Schema.Finite,
  points: Schema.Array(Schema.Tuple([Schema.Finite, Schema.Finite]))
})
const decodeFile = Schema.decodeUnknownOption(Schema.fromJsonString(HistoryFile))

/** Coin ids and currency codes as file names: kept when plainly safe, else a digest (never `..`, `/`, or a long name). */
export const safeName = (id: string): string =>
  /^[a-z0-9][a-z0-9_-]{0,99}$/.test(id) ? id : `_${createHash("sha256").update(id).digest("hex").slice(0, 32)}`

export const historyFile = (dataDir: string, coin: string, currency: string, source: HistorySource) =>
  path.join(dataDir, "rates-history", safeName(source), safeName(currency), `${safeName(coin)}.json`)

/** Files already reported as unreadable, at most this many (then forgotten at once). */
const WARNED_CAPACITY = 1_000

export const makeFileHistory = (dataDir: string) =>
  Effect.sync(() => {
    const warned = new Set<string>()
    const failed = (operation: string) => (error: FileError) => new HistoryError({ operation, reason: error.message })

    const load = (file: string): Effect.Effect<HeldSeries | undefined, FileError> =>
      Effect.flatMap(readTextIfExists(file), (text) => {
        if (text === undefined) return Effect.succeed(undefined)
        const decoded = Option.filter(decodeFile(text), isWellFormed)
        if (Option.isSome(decoded)) {
          const { coveredFrom, coveredTo, points } = decoded.value
          return Effect.succeed({ coveredFrom, coveredTo, points })
        }
        if (warned.has(file)) return Effect.succeed(undefined)
        if (warned.size >= WARNED_CAPACITY) warned.clear()
        warned.add(file)
        return Effect.as(
          Effect.logWarning("rates history: unreadable file, taken as nothing held; the next fetch replaces it").pipe(Effect.annotateLogs({ file })),
          undefined
        )
      })

    return DailyHistory.of({
      read: (coin, currency, source) =>
        load(historyFile(dataDir, coin, currency, source)).pipe(
          Effect.map(Option.fromUndefinedOr),
          Effect.mapError(failed("reading"))
        ),
      write: (coin, currency, source, series) => {
        const file = historyFile(dataDir, coin, currency, source)
        return withFileLock(
          file,
          Effect.flatMap(load(file), (held) => {
            const next = mergeHeld(held, series)
            return writeFileAtomic(file, JSON.stringify({ version: 1, ...next }), 0o600)
          })
        ).pipe(Effect.mapError(failed("writing")))
      }
    })
  })

export const layerFiles = (dataDir: string): Layer.Layer<DailyHistory> => Layer.effect(DailyHistory, makeFileHistory(dataDir))
