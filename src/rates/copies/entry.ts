/**
 * One held copy, as every holder of the rates capability keeps it (Copies.ts): the value, when it was
 * fetched, and until when it serves, in one JSON shape shared with other instances and releases through
 * Redis: `{ storedAt, refreshAt, freshUntil, graceUntil, value }`. Change it only together with a new
 * key prefix (`rates:v2:`).
 *
 * Its lifecycle (Copies.ts), read at `now`: a copy is
 *   - fresh before `refreshAt`: an answer made of it may be repeated until then;
 *   - due before `freshUntil`: fresh, and a read starts one background refresh (what callers keep
 *     asking for is refreshed ahead of expiry and never goes cold);
 *   - in grace before `graceUntil`: served as is while one background refresh runs;
 *   - expired after: a fetch the reader waits for, and if it fails, this copy again, marked stale.
 */
import { Duration } from "effect"

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

/** A value as served, and where it came from. */
export interface Served<A> {
  readonly value: A
  readonly storedAt: number
  /** True when it is the last good copy served because the source failed. */
  readonly stale: boolean
  /** Until when an answer made of it may be repeated without reading it again; 0: not at all. */
  readonly holdsUntil: number
}

