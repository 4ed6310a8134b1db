/**
 * A holder of copies (Copies.ts makes them) and one held copy, JSON shared with other instances and releases (change
 * it only with a new key prefix, `rates:v2:`); the lists are held in the same shape, by the same lifecycle. A copy is fresh
 * before `refreshAt`; due before `freshUntil` (a read starts a background refresh); in grace before `graceUntil`
 * (served while it runs); then expired (the reader waits for a fetch, and if it fails, gets this copy marked stale).
 */
import { Duration, type Effect, type Schema } from "effect"
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

// A held list (Copies.ts `makeHeldList`): the lists' own holder, apart from the per-request copies
export interface HeldListOptions<A, I = unknown> {
  /** For logs and errors: "coin list". */
  readonly name: string
  readonly source: SourceName
  /** Where it is shared with other instances, `rates:v2:<kind>` (the store's entry shape: `Entry`). */
  readonly key: string
  /** What it is: a copy read back from the store is validated with it (another instance or release may have written it). */
  readonly value: Schema.Codec<A, I>
  readonly load: Effect.Effect<A, SourceError>
  /**
   * Reloaded every `everyMs`, by each instance up to `spreadMs` later (so that one loads and the others adopt its
   * copy). Past `lastGoodMs` more (the store keeps it that long), a reader waits for the reload, until its deadline,
   * before taking the copy held.
   */
  readonly reload: { readonly everyMs: number; readonly spreadMs?: number | undefined; readonly lastGoodMs: number }
  /** After a failed load, the first wait: it doubles up to an hour, or up to `maxMsWhileNoneHeld` while none is held. */
  readonly retry: { readonly firstMs: number; readonly maxMsWhileNoneHeld?: number | undefined }
  /** Whether a loaded list may replace the one held (undefined: none); a string (why not) fails the load. */
  readonly accept?: ((fresh: A, held: A | undefined) => true | string) | undefined
}

export interface HeldList<A> {
  /** The list held, else (none, or past its last good time) the load waited for until the `Spend` deadline, else `Unavailable`. */
  readonly get: Effect.Effect<A, SourceError>
  /** Loads it unless it is fresh or loads back off (start-up); ends when that load does. */
  readonly warm: Effect.Effect<void>
  /** `warm`, then again on its schedule: when its period is over, or after a failure at its back-off; never ends. */
  readonly reloads: Effect.Effect<void>
}
