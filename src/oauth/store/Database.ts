/**
 * PostgreSQL as the OAuth state sees it (CONTRACT C2 `DATABASE_URL`, C6): the process's one pool
 * (src/database/Database.ts, shared with the rates history) and the change feed that keeps every
 * instance's copy of the clients and keys current:
 *
 * - LISTEN oauth_changes: a change committed anywhere is reloaded here within milliseconds;
 * - a poll of `oauth_versions` every 500 ms, for notifications lost with a broken connection: a change
 *   reaches every instance within 500 ms plus a query, even without NOTIFY.
 *
 * While PostgreSQL is away the last state read stays in use (tokens are issued and verified from
 * memory); the outage is logged once, `/readyz` reports it, and everything resumes by itself.
 */
import type { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Queue, Schedule, type Scope, Semaphore } from "effect"
import type { AppConfig } from "../../config/AppConfig.ts"
import { Database, databaseError, DatabaseError } from "../../database/Database.ts"
import type { StartupFailure } from "../../lifecycle/StartupFailure.ts"

export { databaseError, Locks } from "../../database/Database.ts"

/** What the change feed follows: a row of `oauth_versions`. */
export type Followed = "clients" | "signing_keys"

export interface OAuthDatabaseShape {
  readonly sql: PgClient.PgClient
  /**
   * Calls `reload` whenever `name` changes, for the life of the calling scope. The version is read
   * first, so a change made between it and the caller's first load is reloaded again, never lost.
   */
  readonly follow: (name: Followed, reload: Effect.Effect<void, DatabaseError>) => Effect.Effect<void, DatabaseError, Scope.Scope>
  /** Readiness: PostgreSQL answers a query. */
  readonly check: Effect.Effect<void, string>
}

const pollEvery = Duration.millis(500)
const channel = "oauth_changes"

const make = Effect.gen(function*() {
  const { check, sql } = yield* Database

  const followers = new Map<string, { version: string | undefined; readonly reload: Effect.Effect<void, DatabaseError> }>()
  const versionOf = (name: string) =>
    Effect.map(sql<{ version: string }>`SELECT version::text AS version FROM oauth_versions WHERE name = ${name}`, (rows) => rows[0]?.version)
  // One refresh at a time: a notification and a poll never interleave their reads and versions.
  const lock = yield* Semaphore.make(1)

  const refresh = (name: string) =>
    lock.withPermits(1)(Effect.gen(function*() {
      const follower = followers.get(name)
      if (follower === undefined) return
      const version = yield* Effect.mapError(versionOf(name), databaseError("reading versions"))
      yield* follower.reload
      follower.version = version
    }))

  const poll = lock.withPermits(1)(
    Effect.gen(function*() {
      const rows = yield* Effect.mapError(
        sql<{ name: string; version: string }>`SELECT name, version::text AS version FROM oauth_versions`,
        databaseError("reading versions")
      )
      for (const row of rows) {
        const follower = followers.get(row.name)
        if (follower === undefined || follower.version === row.version) continue
        yield* follower.reload
        follower.version = row.version
      }
    })
  )

  let reachable = true
  const pollOnce = poll.pipe(
    Effect.timeoutOrElse({ duration: Duration.seconds(2), orElse: () => Effect.fail(new DatabaseError({ operation: "polling", reason: "no answer within 2 s" })) }),
    Effect.matchEffect({
      onSuccess: () => {
        if (reachable) return Effect.void
        reachable = true
        return Effect.logInfo("oauth store: PostgreSQL is back; clients and keys followed again")
      },
      onFailure: (error) => {
        if (!reachable) return Effect.void
        reachable = false
        return Effect.logWarning("oauth store: PostgreSQL unreachable; serving the clients and keys last read", error.reason)
      }
    })
  )
  yield* Effect.forkScoped(Effect.repeat(pollOnce, Schedule.spaced(pollEvery)))

  // LISTEN again after any failure; what changed while not listening is caught by the refresh after it.
  const listen = Effect.scoped(Effect.gen(function*() {
    const notifications = yield* sql.listen(channel)
    for (const name of followers.keys()) yield* Effect.ignore(refresh(name))
    for (;;) {
      const notification = yield* Queue.take(notifications)
      yield* Effect.ignore(refresh(notification.payload))
    }
  }))
  yield* Effect.forkScoped(Effect.retry(listen, Schedule.spaced(Duration.seconds(1))))

  const follow: OAuthDatabaseShape["follow"] = (name, reload) =>
    Effect.gen(function*() {
      const version = yield* Effect.mapError(versionOf(name), databaseError("reading versions"))
      yield* Effect.acquireRelease(
        Effect.sync(() => void followers.set(name, { version, reload })),
        () => Effect.sync(() => void followers.delete(name))
      )
    })

  return OAuthDatabase.of({ sql, follow, check })
})

export class OAuthDatabase extends Context.Service<OAuthDatabase, OAuthDatabaseShape>()("app/oauth/OAuthDatabase") {
  /**
   * On the process's `Database` (built once, shared with the rates history); fails the start-up with
   * a line naming DATABASE_URL when unusable.
   */
  static readonly layer: Layer.Layer<OAuthDatabase, StartupFailure, AppConfig> = Layer.effect(OAuthDatabase, make).pipe(
    Layer.provide(Database.layer)
  )
}
