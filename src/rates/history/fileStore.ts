/** Kept history in files, `DATA_DIR/rates-history/<source>/<currency>/<coin>.json`: read-merge-write under the file's lock, atomic replace. */
import { createHash } from "node:crypto"
import * as path from "node:path"
import { Effect, Option, Schema } from "effect"
import { type FileError, readTextIfExists, withFileLock, writeFileAtomic } from "../../platform/files.ts"
import { mergeHeld, type SeriesId, type SeriesStore, type StoredSeries, validSeries } from "../dailySeries.ts"

const HistoryFile = Schema.Struct({
  version: Schema.Literal(1),
  coveredFrom: Schema.Unknown,
  coveredTo: Schema.Unknown,
  points: Schema.Array(Schema.Tuple([Schema.Unknown, Schema.Unknown]))
})
const decodeFile = Schema.decodeUnknownOption(Schema.fromJsonString(HistoryFile))

/** Coin ids and currency codes as file names: kept when plainly safe, else a digest (never `..`, `/`, or a long name). */
const safeName = (id: string): string =>
  /^[a-z0-9][a-z0-9_-]{0,99}$/.test(id) ? id : `_${createHash("sha256").update(id).digest("hex").slice(0, 32)}`

export const historyFile = (dataDir: string, { coin, currency, source }: SeriesId) =>
  path.join(dataDir, "rates-history", safeName(source), safeName(currency), `${safeName(coin)}.json`)

/** A file that is not a history file: a series the validation refuses whole. */
const UNREADABLE: StoredSeries = { coveredFrom: null, coveredTo: null, points: [] }

export const makeFileStore = (dataDir: string): SeriesStore<FileError> => {
  const load = (file: string): Effect.Effect<StoredSeries | undefined, FileError> =>
    Effect.map(readTextIfExists(file), (text) =>
      text === undefined ? undefined : Option.getOrElse(decodeFile(text), (): StoredSeries => UNREADABLE))
  return {
    read: (id) => load(historyFile(dataDir, id)),
    write: (id, added) => {
      const file = historyFile(dataDir, id)
      return withFileLock(
        file,
        Effect.flatMap(load(file), (stored) => {
          // What is merged with is what a read would have accepted: a bad day never outlives a write.
          const held = stored === undefined ? undefined : validSeries(stored)?.series
          return writeFileAtomic(file, JSON.stringify({ version: 1, ...mergeHeld(held, added) }), 0o600)
        })
      )
    }
  }
}
