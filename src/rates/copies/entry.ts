/**
 * A holder of copies (Copies.ts makes them) and one held copy, JSON shared with other instances and releases (change
 * it only with a new key prefix, `rates:v2:`); the lists (HeldList.ts) are held in the same shape. A copy is fresh
 * before `refreshAt`; due before `freshUntil` (a read starts a background refresh); in grace before `graceUntil`
 * (served while it runs); then expired (the reader waits for a fetch, and if it fails, gets this copy marked stale).
 */
import { Duration, type Effect, Option, Schema } from "effect"
import { deepFreeze } from "../../platform/deepFreeze.ts"
import type { SourceError, SourceName } from "../upstream.ts"

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

/** The entry of `value` fetched at `storedAt`, served as `timing` says. */
export const entryOf = <A>(value: A, storedAt: number, timing: Timing): Entry<A> => {
  const freshUntil = storedAt + Duration.toMillis(timing.ttl)
  return { storedAt, refreshAt: freshUntil - Duration.toMillis(timing.refreshAhead), freshUntil, graceUntil: freshUntil + Duration.toMillis(timing.grace), value }
}

/** Where a copy stands at `now` (see above). */
export type Freshness = "fresh" | "due" | "grace" | "expired"
export const freshnessOf = (entry: Entry<unknown>, now: number): Freshness =>
  now < entry.refreshAt ? "fresh" : now < entry.freshUntil ? "due" : now < entry.graceUntil ? "grace" : "expired"

/** Reads back stored entries, validated once per frozen object (CopyStore.ts); unfrozen ones (tests) every time. */
export const entryDecoder = <A, I>(value: Schema.Codec<A, I>): (json: unknown) => Option.Option<Entry<A>> => {
  const finite = Schema.Finite
  const decode = Schema.decodeUnknownOption(Schema.Struct({ storedAt: finite, refreshAt: finite, freshUntil: finite, graceUntil: finite, value }))
  const decoded = new WeakMap<object, Option.Option<Entry<A>>>()
  return (json) => {
    if (typeof json !== "object" || json === null || !Object.isFrozen(json)) return decode(json) as Option.Option<Entry<A>>
    let entry = decoded.get(json)
    if (entry === undefined) {
      entry = Option.map(decode(json) as Option.Option<Entry<A>>, deepFreeze)
      decoded.set(json, entry)
    }
    return entry
  }
}

/**
 * The wait after the `failures`th failure in a row: doubling from `firstMs` up to `longestMs`; a refusal that says
 * when to come back (the month's pace, a 429) is taken at its word.
 */
export const retryWaitMs = (failures: number, firstMs: number, longestMs: number, error: SourceError) =>
  Math.max(Math.min(longestMs, firstMs * 2 ** (failures - 1)), error.retryAfterSeconds * 1000)
/** What a failed background fetch logs. */
export const failureLine = (name: string, held: boolean, waitMs: number) =>
  `rates: ${name} unavailable; ${held ? "serving the last good copy" : "none held yet"}, next try in ${Math.round(waitMs / 1000)} s`

export interface Served<A> {
  readonly value: A
  readonly storedAt: number
  /** True when it is the last good copy served because the source failed. */
  readonly stale: boolean
  /** Until when an answer made of it may be repeated without reading it again; 0: not at all. */
  readonly holdsUntil: number
}

// A holder of copies, each under its store key (`rates:v2:<kind>:…`: the kind names the metric)
export interface CopiesOptions<A, I = unknown> {
  /** For logs: "latest prices". */
  readonly name: string
  /** Whose failure a reader's timeout is. */
  readonly source: SourceName
  /**
   * What a value is: a copy read back from the store is validated with it (another instance or release may have
   * written it). A null value is a negative answer (no such coin): kept in the store's own tier, fresh for its time,
   * never a last good copy.
   */
  readonly value: Schema.Codec<A, I>
  /** How long `value`, fetched for `key` at `storedAt`, serves (latest prices: its currency's interval). */
  readonly timing: (value: A, storedAt: number, key: string) => Timing
  /** Fresh copies of `keys`, paid as `Spend` says: each key asked (null when the source has none), maybe more. */
  readonly fetch: (keys: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<readonly [string, A]>, SourceError>
  /**
   * When the source fails: how long a copy stays to be served, stale (0: never); the first wait before a background
   * fetch is tried again (doubling up to an hour).
   */
  readonly onFailure: { readonly lastGoodMs: number; readonly retryMs: number }
  /**
   * Keys one call answers together (latest prices: a currency's unit): the cold keys of one read go in one fetch, and a
   * refresh, one at a time for its group, takes the group's keys along. Absent: each key is fetched on its own.
   */
  readonly fetchedTogether?: {
    readonly groupOf: (key: string) => string
    readonly keys: (key: string, now: number) => ReadonlyArray<string>
  } | undefined
  /** Instances sharing the store load a key one at a time, under a lease this long at most. */
  readonly loadLeaseMs?: number | undefined
}

/** What `getAll` gathered: the copies served, and the failures behind those missing or stale. */
interface Gathered<A> {
  readonly served: ReadonlyMap<string, Served<A>>
  readonly failures: ReadonlyMap<string, SourceError>
  readonly failure: SourceError | undefined
}

export interface Copies<A> {
  /** The copy held (refreshed behind when due), else one shared fetch, paid and waited for as `Spend` says, else the last good copy. */
  readonly get: (key: string) => Effect.Effect<Served<A>, SourceError>
  /** Several keys at once, the cold ones in one fetch. Never fails: see `failure`. */
  readonly getAll: (keys: ReadonlyArray<string>) => Effect.Effect<Gathered<A>>
}
