/**
 * PostgreSQL for the OAuth state (CONTRACT C2 `DATABASE_URL`, C6): one connection pool per process,
 * the migrations applied at start-up under an advisory lock (instances starting together apply them
 * once), and the change feed that keeps every instance's copy of the clients and keys current:
 *
 * - LISTEN oauth_changes: a change committed anywhere is reloaded here within milliseconds;
 * - a poll of `oauth_versions` every 500 ms, for notifications lost with a broken connection: a change
 *   reaches every instance within 500 ms plus a query, even without NOTIFY.
 *
 * While PostgreSQL is away the last state read stays in use (tokens are issued and verified from
 * memory); the outage is logged once, `/readyz` reports it, and everything resumes by itself.
 */
import type { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, Queue, Schedule, type Scope, Semaphore } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { AppConfig } from "../../config/AppConfig.ts"
import { Readiness } from "../../http/probes.ts"
import { StartupFailure } from "../../startup.ts"
import { migrate } from "./migrations.ts"
import { DatabaseError } from "./SharedState.ts"

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

/** `pg_advisory_xact_lock` keys: one per writer kind, all in this application's namespace. */
export const Locks = { migrations: 0x63_72_79_70_01, clients: 0x63_72_79_70_02, signingKeys: 0x63_72_79_70_03 } as const

export const pollEvery = Duration.millis(500)
const channel = "oauth_changes"

/** Why a query failed, in a few words (never the URL, never data). */
export const reasonOf = (error: SqlError): string => {
  const cause = error.reason.cause as { code?: unknown; message?: unknown } | undefined
  const code = typeof cause?.code === "string" ? cause.code : undefined
  return code ?? error.message
}

export const databaseError = (operation: string) => (error: SqlError) =>
  new DatabaseError({ operation, reason: reasonOf(error) })

const make = Effect.gen(function*() {
  const { databaseUrl } = yield* AppConfig
  if (databaseUrl === undefined) return yield* Effect.die("OAuthDatabase needs DATABASE_URL")
  const unusable = (reason: string) =>
    new StartupFailure({
      problem: `DATABASE_URL: cannot prepare the PostgreSQL tables (${reason}); check that PostgreSQL runs and that ` +
        `the URL's host, port, user, password and database are right`
    })
  // Loaded only with DATABASE_URL: a process without it never pays for the driver.
  const { PgClient } = yield* Effect.promise(() => import("@effect/sql-pg"))
  const sql = yield* PgClient.make({
    url: databaseUrl,
    connectTimeout: Duration.seconds(3),
    maxConnections: 4,
    idleTimeout: Duration.minutes(1),
    applicationName: "crypto-landing-api"
  }).pipe(Effect.provide(Reactivity.layer), Effect.mapError((e) => unusable(reasonOf(e))))

  // Several instances (or workers) starting together: the first applies, the others find it done.
  yield* sql.withTransaction(Effect.andThen(sql`SELECT pg_advisory_xact_lock(${Locks.migrations})`, migrate)).pipe(
    Effect.provideService(SqlClient, sql),
    // PostgreSQL still starting (a compose file started both at once): a few seconds' patience.
    Effect.retry({
      times: 10,
      schedule: Schedule.spaced(Duration.millis(500)),
      while: (e) => e._tag === "SqlError" && e.reason._tag === "ConnectionError"
    }),
    Effect.mapError((error) => unusable(error._tag === "SqlError" ? reasonOf(error) : error.message))
  )

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

  const check = sql`SELECT 1`.pipe(Effect.asVoid, Effect.mapError((e) => `unreachable (${reasonOf(e)})`))
  // The server's /readyz reports PostgreSQL (the CLI has no Readiness).
  const readiness = yield* Effect.serviceOption(Readiness)
  if (Option.isSome(readiness)) yield* readiness.value.addCheck("postgresql", check)
  return OAuthDatabase.of({ sql, follow, check })
})

export class OAuthDatabase extends Context.Service<OAuthDatabase, OAuthDatabaseShape>()("app/oauth/OAuthDatabase") {
  /** From `AppConfig.databaseUrl`; fails the start-up with a line naming DATABASE_URL when unusable. */
  static readonly layer: Layer.Layer<OAuthDatabase, StartupFailure, AppConfig> = Layer.effect(OAuthDatabase, make)
}
