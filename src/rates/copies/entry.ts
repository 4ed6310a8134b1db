/**
 * A holder of copies (Copies.ts makes them) and one held copy, JSON shared with other instances and releases (change
 * it only with a new key prefix, `rates:v2:`). A copy is fresh before `refreshAt`; due before `freshUntil` (a read
 * starts a background refresh); in grace before `graceUntil` (served while it runs); then expired (the reader waits
 * for a fetch, and if it fails, gets this copy marked stale).
 */
import { Duration, type Effect, type Schema } from "effect"
import type { Charge, SourceError, SourceName } from "../upstream.ts"

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

export interface Served<A> {
  readonly value: A
  readonly storedAt: number
  /** True when it is the last good copy served because the source failed. */
  readonly stale: boolean
  /** Until when an answer made of it may be repeated without reading it again; 0: not at all. */
  readonly holdsUntil: number
}

// A holder of copies
export interface CopiesOptions<K, A, I = unknown> {
  /** For logs: "coin index". */
  readonly name: string
  /** Whose failure a reader's timeout is. */
  readonly source: SourceName
  /** The store key, `rates:v2:<kind>:…` (the kind names the metric); absent: the key, a string, is the store key. */
  readonly keyOf?: ((key: K) => string) | undefined
  /** What a value is: a copy read back from the store is validated with it (another instance or release may have written it). */
  readonly value: Schema.Codec<A, I>
  /** How long `value`, fetched for `key` at `storedAt`, serves (latest prices: its currency's interval). */
  readonly timing: (value: A, storedAt: number, key: K) => Timing
  /** A negative answer: kept in the store's own tier, fresh for its time, never a last good copy. */
  readonly isNegative?: ((value: A) => boolean) | undefined
  /** Fresh copies of `keys`, paid by `charge`: each key asked (negative when the source has none), maybe more. */
  readonly fetch: (keys: ReadonlyArray<K>, charge: Charge) => Effect.Effect<ReadonlyArray<readonly [K, A]>, SourceError>
  /** How long a copy stays to be served, stale, when the source fails; 0: never served stale. */
  readonly lastGoodMs: number
  /** First wait after a failed background fetch; doubles up to an hour. */
  readonly retryMs: number
  /** The longest background retry wait while no copy is held (an hour when absent); Retry-After still holds. */
  readonly retryMaxMsWhileNoneHeld?: number | undefined
  /** Keys refreshed together: the group a key's refresh is known by, and what it fetches. */
  readonly refreshGroup?: {
    readonly of: (key: K) => string
    readonly keys: (key: K, now: number) => ReadonlyArray<K>
  } | undefined
  /** Cold keys read together are fetched in one call (`/coins/markets`); else each in its own. */
  readonly batched?: boolean | undefined
  /** Held in this process whatever the memory store evicts (a list, one entry); shared through Redis too. */
  readonly pinned?: boolean | undefined
  /** Instances sharing the store load a key one at a time, under a lease this long at most (pinned: a minute). */
  readonly loadLeaseMs?: number | undefined
  /** Instances sharing a copy refresh up to this far apart, so one fetches and the others adopt its copy. */
  readonly refreshSpreadMs?: number | undefined
  /** A failed background fetch is a warning (the lists), else a debug line. */
  readonly warnOnFailure?: boolean | undefined
  /** Whether a fetched value may replace the held one (undefined: none); a string (why not) fails the fetch. */
  readonly accept?: ((fresh: A, held: A | undefined) => true | string) | undefined
}

/** What `getAll` gathered: the copies served, and the failures behind those missing or stale. */
interface Gathered<K, A> {
  readonly served: ReadonlyMap<K, Served<A>>
  readonly failures: ReadonlyMap<K, SourceError>
  readonly failure: SourceError | undefined
}

export interface Copies<K, A> {
  /** The copy held (refreshed behind when due), else one shared fetch waited for until `deadline`, else the last good copy. */
  readonly get: (key: K, charge: Charge, deadline: number) => Effect.Effect<Served<A>, SourceError>
  /** Several keys at once, the cold ones in one fetch. Never fails: see `failure`. */
  readonly getAll: (keys: ReadonlyArray<K>, charge: Charge, deadline: number) => Effect.Effect<Gathered<K, A>>
  /** Loads `key` in the background unless fresh or loading (lists at start-up); ends when that load does. */
  readonly warm: (key: K) => Effect.Effect<void>
  /** Seconds until a background fetch of `key` may be tried again (a Retry-After while nothing is held). */
  readonly retryAfterSeconds: (key: K) => Effect.Effect<number>
}

