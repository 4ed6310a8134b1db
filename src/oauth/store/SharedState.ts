/**
 * What the OAuth registry and keys are kept in: state that every writer (an instance, the CLI) changes
 * by read-modify-write, and that readers hold in memory. Two kinds: a file under DATA_DIR
 * (src/platform/ReloadingFile.ts, the embedded default) and PostgreSQL tables (./pgState.ts).
 */
import { Data, type Effect } from "effect"
import type { FileError } from "../../platform/files.ts"

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

/** PostgreSQL could not be read or written, or holds what cannot be used. Never holds the URL or data. */
export class DatabaseError extends Data.TaggedError("DatabaseError")<{
  readonly operation: string
  readonly reason: string
}> {
  override get message() {
    return `PostgreSQL (DATABASE_URL): ${this.operation}: ${this.reason}`
  }
}

/** Where the registry or the keys could not be stored. */
export type StorageError = FileError | DatabaseError
