/**
 * A `SharedState` in PostgreSQL tables: the value held in memory (what the hot path reads), reloaded
 * whenever the tables change (./Database.ts follows them), and changed by read-modify-write in one
 * transaction under the state's advisory lock, so that two writers (instances, the CLI) never lose
 * each other's change. A reload that fails keeps the last good value (logged once per problem).
 */
import { Effect, type Scope } from "effect"
import { isSqlError, type SqlError } from "effect/sql/SqlError"
import { databaseError, type Followed, type OAuthDatabaseShape } from "./Database.ts"
import type { DatabaseError, SharedState } from "./SharedState.ts"

export interface PgStateOptions<A> {
  readonly name: Followed
  readonly lockKey: number
  /** Names the state in logs: "<label> reloaded". */
  readonly label: string
  /** The whole value, read from the tables (content that does not decode is a DatabaseError). */
  readonly load: Effect.Effect<A, DatabaseError>
  /** Writes what differs between `current` (as just loaded) and `next`. */
  readonly save: (current: A, next: A) => Effect.Effect<void, SqlError>
  readonly created?: boolean
  /** Log annotations for a freshly loaded value; never secrets. */
  readonly describe?: (value: A) => Record<string, unknown>
}

export const makePgState = <A>(
  db: OAuthDatabaseShape,
  options: PgStateOptions<A>
): Effect.Effect<SharedState<A, DatabaseError>, DatabaseError, Scope.Scope> =>
  Effect.gen(function*() {
    const { sql } = db
    let warned: string | undefined
    let value: A

    const keepLastGood = (error: DatabaseError) =>
      Effect.suspend(() => {
        if (warned === error.reason) return Effect.void
        warned = error.reason
        return Effect.logWarning(`${options.label} not reloaded; keeping the last good value`).pipe(
          Effect.annotateLogs({ reason: error.message })
        )
      })

    const reload = Effect.flatMap(options.load, (loaded) =>
      Effect.suspend(() => {
        value = loaded
        warned = undefined
        return Effect.logInfo(`${options.label} reloaded`).pipe(Effect.annotateLogs(options.describe?.(loaded) ?? {}))
      })).pipe(Effect.tapError(keepLastGood))

    // Version first, then the value: a change in between is reloaded again, never missed.
    yield* db.follow(options.name, reload)
    value = yield* options.load

    const modify: SharedState<A, DatabaseError>["modify"] = (f) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT pg_advisory_xact_lock(${options.lockKey})`
        const current = yield* options.load
        const { next, result } = yield* f(current)
        if (next !== current) yield* options.save(current, next)
        return { next, result }
      })).pipe(
        Effect.mapError((e) => (isSqlError(e) ? databaseError(`writing the ${options.name}`)(e) : e)),
        Effect.map(({ next, result }) => {
          value = next
          return result
        })
      )

    return {
      created: options.created ?? false,
      get: Effect.sync(() => value),
      latest: Effect.matchEffect(options.load, {
        onSuccess: (loaded) => Effect.sync(() => (value = loaded)),
        onFailure: (error) => Effect.as(keepLastGood(error), value)
      }),
      modify
    }
  })
