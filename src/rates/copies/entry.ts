/**
 * One held copy, as every holder of the rates capability keeps it (Copies.ts): the value, when it was
 * fetched, and until when it serves, in one JSON shape shared with other instances and releases through
 * Redis: `{ storedAt, refreshAt, freshUntil, graceUntil, value }`. Change it only together with a new
 * key prefix (`rates:v2:`).
 *
 * Read at `now`, a copy is:
 *   - fresh before `refreshAt`: an answer made of it may be repeated until then;
 *   - due before `freshUntil`: fresh, and a read starts one background refresh (what callers keep
 *     asking for is refreshed ahead of expiry and never goes cold);
 *   - in grace before `graceUntil`: served as is while one background refresh runs;
 *   - expired after: a fetch the reader waits for, and if it fails, this copy again, marked stale.
 */
import { Duration, Option, Schema } from "effect"
import { deepFreeze } from "../../platform/deepFreeze.ts"

export interface Entry<A> {
  /** When the value was fetched from the source (epoch ms). */
  readonly storedAt: number
  readonly refreshAt: number
  readonly freshUntil: number
  readonly graceUntil: number
  readonly value: A
}

/** How long a value serves, decided when it is stored. */
export interface Timing {
  readonly ttl: Duration.Duration
  /** How long before expiry a read starts a refresh (zero: none before expiry). */
  readonly refreshAhead: Duration.Duration
  /** How long after expiry it is still served while a refresh runs. */
  readonly grace: Duration.Duration
}

/** Fresh for `ttl`, never served past it (negative answers, short-lived values). */
export const freshFor = (ttl: Duration.Duration): Timing => ({ ttl, refreshAhead: Duration.zero, grace: Duration.zero })

export const entryAt = <A>(value: A, storedAt: number, timing: Timing): Entry<A> => {
  const freshUntil = storedAt + Duration.toMillis(timing.ttl)
  return {
    storedAt,
    refreshAt: freshUntil - Duration.toMillis(timing.refreshAhead),
    freshUntil,
    graceUntil: freshUntil + Duration.toMillis(timing.grace),
    value
  }
}

export type Freshness = "fresh" | "due" | "grace" | "expired"

export const freshnessOf = (entry: Entry<unknown>, now: number): Freshness =>
  now < entry.refreshAt ? "fresh" : now < entry.freshUntil ? "due" : now < entry.graceUntil ? "grace" : "expired"

/** A value as served, and where it came from. */
export interface Served<A> {
  readonly value: A
  readonly storedAt: number
  /** True when it is the last good copy served because the source failed. */
  readonly stale: boolean
  /** Until when an answer made of it may be repeated without reading it again; 0: not at all. */
  readonly holdsUntil: number
}

/** The copy as served now, when it is not expired. */
export const served = <A>(entry: Entry<A>, freshness: Freshness): Served<A> => ({
  value: entry.value,
  storedAt: entry.storedAt,
  stale: false,
  holdsUntil: freshness === "fresh" ? entry.refreshAt : freshness === "due" ? entry.freshUntil : 0
})

/** A last good copy, served because the source failed. */
export const lastGood = <A>(entry: Entry<A>): Served<A> => ({ value: entry.value, storedAt: entry.storedAt, stale: true, holdsUntil: 0 })


/** Reads back one stored entry, or nothing if it is not what we wrote. */
export type EntryDecoder<A> = (json: unknown) => Option.Option<Entry<A>>

/**
 * The decoder of entries holding `value`s. Every read is validated, but once per stored object: the
 * stores hand back the same frozen object until the entry is rewritten (CopyStore.ts), so the outcome
 * is remembered by that object's identity. Objects that are not frozen (a test's store) could change
 * after the check, so they are decoded each time.
 */
export const entryOf = <A, I>(value: Schema.Codec<A, I>): EntryDecoder<A> => {
  const decode = Schema.decodeUnknownOption(Schema.Struct({
    storedAt: Schema.Finite,
    refreshAt: Schema.Finite,
    freshUntil: Schema.Finite,
    graceUntil: Schema.Finite,
    value
  }))
  const decoded = new WeakMap<object, Option.Option<Entry<A>>>()
  return (json) => {
    if (typeof json !== "object" || json === null || !Object.isFrozen(json)) return decode(json)
    let entry = decoded.get(json)
    if (entry === undefined) {
      entry = Option.map(decode(json), deepFreeze)
      decoded.set(json, entry)
    }
    return entry
  }
}
