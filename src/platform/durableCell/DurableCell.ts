/**
 * A small named value that outlives the process and is shared by every instance that uses the same
 * store: read it, then replace it only if nobody changed it since (compare-and-set). Callers keep
 * their rules in TypeScript and retry on a lost race, so each store needs only a get and a CAS.
 *
 * Implementations: memory.ts (tests, one process), file.ts (under DATA_DIR, processes sharing it),
 * redis.ts (REDIS_URL), postgres.ts (DATABASE_URL); layer.ts chooses from the configuration.
 */
import { Context, Data, type Effect } from "effect"

/** The store could not be read or written (Redis or PostgreSQL away, a file unwritable). */
export class DurableCellError extends Data.TaggedError("DurableCellError")<{
  readonly store: string
  readonly reason: string
}> {
  override get message() {
    return `${this.store}: ${this.reason}`
  }
}

export interface DurableCellShape {
  /** Where the values live, for logs: "memory", "file", "redis", "postgresql". */
  readonly store: string
  /**
   * The store's own clock (epoch ms): one time for every instance sharing it, whatever their own clocks
   * say (a host whose clock ran ahead). This process's Clock for the stores it alone uses.
   */
  readonly now: Effect.Effect<number, DurableCellError>
  /** The value of `name`, or undefined when none was ever set. */
  readonly get: (name: string) => Effect.Effect<string | undefined, DurableCellError>
  /** Sets `name` to `next` if its value is still `expected` (undefined: still unset); true when it did. */
  readonly compareAndSet: (name: string, expected: string | undefined, next: string) => Effect.Effect<boolean, DurableCellError>
}

export class DurableCell extends Context.Service<DurableCell, DurableCellShape>()("app/DurableCell") {}
