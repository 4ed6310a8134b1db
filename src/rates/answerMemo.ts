/**
 * The last step of a `historical` call: the answer remembered. Its 200 body is encoded once here, and
 * kept, per query, while every value behind it is fresh (`RatesAnswer.freshUntil`); the edge asks
 * `ratesReadyAnswer` (readyAnswer.ts) for a repeated query and sends the remembered bytes without
 * running the HttpApi or the use case. Held in the memory tier every holder of copies uses
 * (copies/CopyStore.ts): bounded in entries and bytes, least recently used out first, as queries come
 * from callers.
 *
 * When an answer's freshness ends, one request rebuilds it: the first repeat after that instant is let
 * through to the use case, and the repeats that arrive while it runs (REBUILD_GRACE_MS at most) get the
 * answer as it was, rather than all rebuilding it at once. A live answer ends every second: without
 * this, every connection's request at that instant took the whole pipeline, once a second.
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
  /**
   * The body remembered for `query` while it is fresh; undefined otherwise, and for the one repeat that
   * is to rebuild an answer just past its freshness (its others get that answer meanwhile). Synchronous.
   */
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

/**
 * How long past its freshness an answer is still sent while one request rebuilds it: a rebuild from held
 * copies takes milliseconds; one that waits on an upstream, or fails, leaves the repeats to the use case
 * again after this.
 */
export const REBUILD_GRACE_MS = 250

interface HeldBody {
  readonly body: Uint8Array
  readonly freshUntil: number
  /** When a repeat was let through to rebuild it, once past `freshUntil`. */
  rebuildingSince: number | undefined
}

/** The memo, telling time by `now` (the Clock's `currentTimeMillisUnsafe`). */
export const makeRatesAnswerMemo = (now: () => number, options: RatesAnswerMemoOptions = {}): RatesAnswerMemoShape => {
  // Entries outlive their freshness by the grace, for the repeats that arrive while one rebuilds them.
  const bodies = makeExpiringLru<HeldBody>(options.maxEntries ?? 512, options.maxBytes ?? 8 * 1024 * 1024)
  const keep = (query: RatesQuery, body: Uint8Array, freshUntil: number) => {
    const key = memoKey(query)
    // A newer answer replaces the held one, also one that is not kept (stale, or past already).
    bodies.remove(key)
    if (freshUntil > now()) {
      bodies.put(key, { value: { body, freshUntil, rebuildingSince: undefined }, expiresAt: freshUntil + REBUILD_GRACE_MS, bytes: body.byteLength })
    }
  }
  const recall = (query: RatesQuery): Uint8Array | undefined => {
    const at = now()
    const held = bodies.get(memoKey(query), at)?.value
    if (held === undefined) return undefined
    if (held.freshUntil > at) return held.body
    if (held.rebuildingSince !== undefined && held.rebuildingSince <= at) return held.body
    held.rebuildingSince = at
    return undefined
  }
  return {
    remember: (query, answer) => {
      const body = answer.body ?? encodeRatesBody(answer.result)
      if (body === undefined) return answer
      keep(query, body, answer.freshUntil)
      return { ...answer, body }
    },
    recall,
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
