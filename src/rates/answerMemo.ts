/**
 * Encoded 200 bodies of POST /api/v1/exchange-rates given moments ago, per query, each while every value
 * behind it is fresh (`RatesAnswer.freshUntil`). The handler remembers what it answers; the edge asks
 * `ratesReadyAnswer` (readyAnswer.ts) for a repeated query and sends the remembered bytes without
 * running the HttpApi or the provider. Both must see the same instance: provide `RatesAnswerMemo.layer`
 * once to everything that is built together (Layers are memoised per build, so the same `layer` value
 * provided in two places of one build is still one memo).
 *
 * Bounded, as queries come from callers: in entries and in bytes, least recently used out first.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { makeBoundedLru } from "../platform/boundedLru.ts"
import type { RatesQuery } from "./RatesProvider.ts"

export interface RatesAnswerMemoShape {
  /** Keeps `body` for `query` until `freshUntil` (epoch ms); ignored when that is not after now. */
  readonly remember: (query: RatesQuery, body: Uint8Array, freshUntil: number) => void
  /** The body remembered for `query` while it is fresh; undefined otherwise. Synchronous, no I/O. */
  readonly recall: (query: RatesQuery) => Uint8Array | undefined
  /** Entries and bytes held now (metrics, tests). */
  readonly size: () => { readonly entries: number; readonly bytes: number }
}

export interface RatesAnswerMemoOptions {
  /** Most entries held (default 512). */
  readonly maxEntries?: number
  /** Most body bytes held in all (default 8 MiB); a larger body is not kept at all. */
  readonly maxBytes?: number
}

/** One key per normalised query (`toRatesQuery`): the currency, the days, the symbols in order. */
export const memoKey = (query: RatesQuery): string => `${query.currency}|${query.days}|${query.symbols.join(",")}`

interface Remembered {
  readonly body: Uint8Array
  readonly freshUntil: number
}

/** The memo, telling time by `now` (the Clock's `currentTimeMillisUnsafe`). */
export const makeRatesAnswerMemo = (now: () => number, options: RatesAnswerMemoOptions = {}): RatesAnswerMemoShape => {
  const entries = makeBoundedLru<Remembered>({
    maxEntries: options.maxEntries ?? 512,
    maxBytes: options.maxBytes ?? 8 * 1024 * 1024,
    bytesOf: (_, remembered) => remembered.body.byteLength
  })
  return {
    remember: (query, body, freshUntil) => {
      const key = memoKey(query)
      entries.remove(key)
      if (freshUntil > now()) entries.put(key, { body, freshUntil })
    },
    recall: (query) => {
      const key = memoKey(query)
      const known = entries.get(key)
      if (known === undefined) return undefined
      if (now() < known.freshUntil) return known.body
      entries.remove(key)
      return undefined
    },
    size: entries.size
  }
}

export class RatesAnswerMemo extends Context.Service<RatesAnswerMemo, RatesAnswerMemoShape>()("app/RatesAnswerMemo") {
  /** A memo with these bounds, telling time by the Clock of the context it is built in (TestClock in tests). */
  static readonly layerWith = (options: RatesAnswerMemoOptions): Layer.Layer<RatesAnswerMemo> =>
    Layer.effect(
      RatesAnswerMemo,
      Clock.clockWith((clock) => Effect.sync(() => makeRatesAnswerMemo(() => clock.currentTimeMillisUnsafe(), options)))
    )

  /** 512 entries, 8 MiB of bodies. Provide it once (see above). */
  static readonly layer: Layer.Layer<RatesAnswerMemo> = RatesAnswerMemo.layerWith({})
}
