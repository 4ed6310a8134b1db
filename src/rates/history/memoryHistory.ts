/** `DailyHistory` in memory: one process, gone with it; for tests. */
import { Effect, Layer, Option } from "effect"
import { DailyHistory, type HeldSeries, mergeHeld, seriesKey } from "./DailyHistory.ts"

export const makeMemoryHistory = Effect.sync(() => {
  const held = new Map<string, HeldSeries>()
  return DailyHistory.of({
    read: (coin, currency, source) => Effect.sync(() => Option.fromUndefinedOr(held.get(seriesKey(coin, currency, source)))),
    write: (coin, currency, source, series) =>
      Effect.sync(() => {
        const key = seriesKey(coin, currency, source)
        held.set(key, mergeHeld(held.get(key), series))
      })
  })
})

export const layerMemory: Layer.Layer<DailyHistory> = Layer.effect(DailyHistory, makeMemoryHistory)
