/** The kept history in memory: one process, gone with it (tests, the demo). */
import { Effect } from "effect"
import { type HeldSeries, mergeHeld, type SeriesStore, seriesKey } from "../dailySeries.ts"

export const makeMemoryStore = (): SeriesStore<never> => {
  const held = new Map<string, HeldSeries>()
  return {
    read: (id) => Effect.sync(() => held.get(seriesKey(id))),
    write: (id, added) =>
      Effect.sync(() => {
        const key = seriesKey(id)
        held.set(key, mergeHeld(held.get(key), added))
      })
  }
}
