/**
 * PostgreSQL, one home for every capability that keeps state there (CONTRACT C2 `DATABASE_URL`): the
 * OAuth registry and keys (src/oauth/store) and the rates history (src/rates/history). One connection
 * pool per process, whoever asks first: every Layer that needs it provides `Database.layer`, the same
 * value, which Effect builds once per application. The migrations (./migrations.ts) are applied at
 * start-up under an advisory lock, so instances starting together apply them once; `/readyz` reports
 * PostgreSQL through `check`.
 */
import type { PgClient } from "@effect/sql-pg"
import { Context, Data, Duration, Effect, Layer, Option, Schedule } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { AppConfig } from "../config/AppConfig.ts"
import { Readiness } from "../lifecycle/Readiness.ts"
import { StartupFailure } from "../lifecycle/StartupFailure.ts"
import { migrate } from "./migrations.ts"

/** PostgreSQL could not be read or written, or holds what cannot be used. Never holds the URL or data. */
export class DatabaseError extends Data.TaggedError("DatabaseError")<{
  readonly operation: string
  readonly reason: string
}> {
  override get message() {
    return `PostgreSQL (DATABASE_URL): ${this.operation}: ${this.reason}`
  }
}

export interface DatabaseShape {
  readonly sql: PgClient.PgClient
  /** Readiness: PostgreSQL answers a query. */
  readonly check: Effect.Effect<void, string>
}

/** `pg_advisory_xact_lock` keys: one per writer kind, all in this application's namespace. */
export const Locks = { migrations: 0x63_72_79_70_01, clients: 0x63_72_79_70_02, signingKeys: 0x63_72_79_70_03 } as const

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
  if (databaseUrl === undefined) return yield* Effect.die("Database needs DATABASE_URL")
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

  const check = sql`SELECT 1`.pipe(Effect.asVoid, Effect.mapError((e) => `unreachable (${reasonOf(e)})`))
  // The server's /readyz reports PostgreSQL (the CLI has no Readiness).
  const readiness = yield* Effect.serviceOption(Readiness)
  if (Option.isSome(readiness)) yield* readiness.value.addCheck("postgresql", check)
  return Database.of({ sql, check })
})

export class Database extends Context.Service<Database, DatabaseShape>()("app/Database") {
  /** From `AppConfig.databaseUrl`; fails the start-up with a line naming DATABASE_URL when unusable. */
  static readonly layer: Layer.Layer<Database, StartupFailure, AppConfig> = Layer.effect(Database, make)
}
