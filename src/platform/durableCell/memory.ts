/** DurableCell in this process's memory: for tests and for callers that want no durability. */
import { Clock, Effect, Layer } from "effect"
import { DurableCell, type DurableCellShape } from "./DurableCell.ts"

export const makeMemoryCell = (): DurableCellShape => {
  const values = new Map<string, string>()
  return {
    store: "memory",
    now: Clock.currentTimeMillis,
    get: (name) => Effect.sync(() => values.get(name)),
    compareAndSet: (name, expected, next) =>
      Effect.sync(() => {
        if (values.get(name) !== expected) return false
        values.set(name, next)
        return true
      })
  }
}

export const layerMemory: Layer.Layer<DurableCell> = Layer.sync(DurableCell, makeMemoryCell)
