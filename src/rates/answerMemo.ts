/**
 * The last step of a `historical` call: the answer remembered. Its 200 body is encoded once here, and
 * kept, per query, while every value behind it is fresh (`RatesAnswer.freshUntil`); the edge asks
 * `ratesReadyAnswer` (readyAnswer.ts) for a repeated query and sends the remembered bytes without
 * running the HttpApi or the use case. Held in the memory tier every holder of copies uses
 * (copies/CopyStore.ts): bounded in entries and bytes, least recently used out first, as queries come
 * from callers.
 *
 * The use case and the ready answer must see the same instance: provide `RatesAnswerMemo.layer` within
 * one build (Layers are memoised per build, so the same `layer` value provided in two places of one
 * build is still one memo).
 */
import { Clock, Context, Effect, Exit, Layer, Schema } from "effect"
import { ExchangeRatesResponse } from "../api/schemas.ts"
import { makeExpiringLru } from "./copies/CopyStore.ts"
import type { RatesAnswer, RatesQuery, RatesResult } from "./RatesProvider.ts"

export interface RatesAnswerMemoShape {
  /** Encodes the answer's body and keeps it for `query` while it holds; the answer with its body. */
  readonly remember: (query: RatesQuery, answer: RatesAnswer) => RatesAnswer
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

/** One key per normalised query (handlers.ts `toRatesQuery`): the currency, the days, the symbols in order. */
export const memoKey = (query: RatesQuery): string => `${query.currency}|${query.days}|${query.symbols.join(",")}`

const encodeResponse = Schema.encodeUnknownExit(ExchangeRatesResponse)
const utf8 = new TextEncoder()

/**
 * The 200 body exactly as HttpApi would encode it (the `ExchangeRatesResponse` encoding, then
 * `JSON.stringify`), or undefined when the result does not encode (left to HttpApi to report).
 */
export const encodeRatesBody = (result: RatesResult): Uint8Array | undefined => {
  const encoded = encodeResponse(result)
  return Exit.isFailure(encoded) ? undefined : utf8.encode(JSON.stringify(encoded.value))
}

/** The memo, telling time by `now` (the Clock's `currentTimeMillisUnsafe`). */
export const makeRatesAnswerMemo = (now: () => number, options: RatesAnswerMemoOptions = {}): RatesAnswerMemoShape => {
  const bodies = makeExpiringLru<Uint8Array>(options.maxEntries ?? 512, options.maxBytes ?? 8 * 1024 * 1024)
  const keep = (query: RatesQuery, body: Uint8Array, freshUntil: number) => {
    const key = memoKey(query)
    bodies.remove(key)
    if (freshUntil > now()) bodies.put(key, { value: body, expiresAt: freshUntil, bytes: body.byteLength })
  }
  return {
    remember: (query, answer) => {
      const body = answer.body ?? encodeRatesBody(answer.result)
      if (body === undefined) return answer
      keep(query, body, answer.freshUntil)
      return { ...answer, body }
    },
    recall: (query) => bodies.get(memoKey(query), now())?.value,
    size: bodies.size
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
