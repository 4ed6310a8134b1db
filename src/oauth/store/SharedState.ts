/**
 * What the OAuth registry and keys are kept in: state that every writer (an instance, the CLI) changes
 * by read-modify-write, and that readers hold in memory. Two kinds: a file under DATA_DIR
 * (src/platform/ReloadingFile.ts, the embedded default) and PostgreSQL tables (./pgState.ts).
 */
import type { Effect } from "effect"
import type { DatabaseError } from "../../database/Database.ts"
import type { FileError } from "../../platform/files.ts"

export { DatabaseError } from "../../database/Database.ts"

export interface SharedState<A, StoreError> {
  /** Whether opening created the state (a first signing key). */
  readonly created: boolean
  /** The value held in memory (kept up to date in the background). Never fails. */
  readonly get: Effect.Effect<A>
  /** The newest stored value, read now (a CLI listing what it just changed); the last good one if unreadable. */
  readonly latest: Effect.Effect<A>
  /** Read-modify-write from the store, never from memory, excluding other writers; `next === current` writes nothing. */
  readonly modify: <B, E>(
    f: (current: A) => Effect.Effect<{ readonly next: A; readonly result: B }, E>
  ) => Effect.Effect<B, E | StoreError>
}

/** Where the registry or the keys could not be stored. */
export type StorageError = FileError | DatabaseError
