/**
 * What every store of the kept history (memory, files, PostgreSQL) holds per series, and the one
 * validation of what is read back from any of them (DailyHistory.ts applies it to every read; the file
 * store also before merging a write). A store only keeps and hands back; it never decides what a valid
 * day is.
 */
import type { Effect } from "effect"
import { DAY_MS } from "../dailySeries.ts"
import type { SourceName } from "../upstream.ts"

export interface HeldSeries {
  /** Epoch ms at 00:00 UTC of the first and the last closed day fetched from this source: every day in between was asked for, with or without a point. */
  readonly coveredFrom: number
  readonly coveredTo: number
  /** One per day, at 00:00 UTC, oldest first. */
  readonly points: ReadonlyArray<readonly [day: number, price: number]>
}

/** A series as a store hands it back, before validation: whatever was written, or tampered with. */
export interface StoredSeries {
  readonly coveredFrom: unknown
  readonly coveredTo: unknown
  readonly points: ReadonlyArray<readonly [unknown, unknown]>
}

/** One series: a coin in a currency from a source. */
export interface SeriesId {
  readonly coin: string
  readonly currency: string
  readonly source: SourceName
}

/** The key of one series in memory and in logs. */
export const seriesKey = ({ coin, currency, source }: SeriesId) => `${source}/${currency}/${coin}`

/** The store's side: keep and hand back. `E` is the store's own failure (a file's, PostgreSQL's). */
export interface SeriesStore<E> {
  readonly read: (id: SeriesId) => Effect.Effect<StoredSeries | undefined, E>
  /** Adds the days of `added` (validated): a day already held is kept (first write wins), the coverage becomes the hull. */
  readonly write: (id: SeriesId, added: HeldSeries) => Effect.Effect<void, E>
}

const isDay = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value) && value % DAY_MS === 0

/** A price a day can have: a finite number above zero. */
const isPrice = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value) && value > 0

/**
 * What was read, as the history promises it: days at 00:00 UTC, oldest first, one each, each a positive
 * price, inside a coverage that ends no later than `lastDay`. A day that breaks this inside the coverage
 * (a price tampered with, `NaN`, `-1`) ends the coverage the day before it, so that it, and what follows,
 * are asked of the source again; it is named in `dropped`. A point outside the coverage is ignored.
 * Undefined when nothing of the coverage is left (or it is not two days in order): nothing held.
 */
export const validSeries = (
  stored: StoredSeries,
  lastDay = Number.POSITIVE_INFINITY
): { readonly series: HeldSeries; readonly dropped: ReadonlyArray<string> } | undefined => {
  const { coveredFrom } = stored
  if (!isDay(coveredFrom) || !isDay(stored.coveredTo) || coveredFrom > stored.coveredTo) return undefined
  let coveredTo: number = stored.coveredTo
  const dropped: Array<string> = []
  if (coveredTo > lastDay) {
    // A day not closed yet cannot have been asked: a clock that ran ahead wrote it.
    dropped.push(`coverage to ${dayName(coveredTo)}, after ${dayName(lastDay)}`)
    coveredTo = lastDay
  }
  const points: Array<readonly [number, number]> = []
  for (const [day, price] of stored.points) {
    const inside = typeof day === "number" && day >= coveredFrom && day <= coveredTo
    if (!inside && isDay(day)) continue
    const last = points.at(-1)?.[0]
    if (isDay(day) && isPrice(price) && (last === undefined || day > last)) {
      points.push([day, price])
      continue
    }
    dropped.push(`${isDay(day) ? dayName(day) : String(day)}: ${String(price)}`)
    coveredTo = Math.min(coveredTo, isDay(day) ? day - DAY_MS : coveredFrom - DAY_MS)
  }
  if (coveredTo < coveredFrom) return undefined
  return { series: { coveredFrom, coveredTo, points: points.filter(([day]) => day <= coveredTo) }, dropped }
}

const dayName = (day: number) => new Date(day).toISOString().slice(0, 10)

/**
 * The held series after a write of `added` (points off the days or outside its coverage ignored):
 * the hull of both coverages, a day already held kept as is (closed days never change).
 */
export const mergeHeld = (held: HeldSeries | undefined, added: HeldSeries): HeldSeries => {
  const byDay = new Map<number, number>(held?.points ?? [])
  for (const [day, price] of added.points) {
    if (isDay(day) && isPrice(price) && day >= added.coveredFrom && day <= added.coveredTo && !byDay.has(day)) byDay.set(day, price)
  }
  return {
    coveredFrom: held === undefined ? added.coveredFrom : Math.min(held.coveredFrom, added.coveredFrom),
    coveredTo: held === undefined ? added.coveredTo : Math.max(held.coveredTo, added.coveredTo),
    points: [...byDay].sort((a, b) => a[0] - b[0])
  }
}
