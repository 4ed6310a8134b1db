/**
 * DurableCell in PostgreSQL (DATABASE_URL; table `durable_cells` of src/database/migrations.ts), on the
 * process's one pool: shared by every instance and durable. The compare-and-set is one statement (an
 * insert that does nothing when the name exists, or an update guarded by the old value), so it is atomic
 * whatever the number of instances racing.
 */
import { Effect, Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { AppConfig } from "../../config/AppConfig.ts"
import { Database, reasonOf } from "../../database/Database.ts"
import type { StartupFailure } from "../../lifecycle/StartupFailure.ts"
import { DurableCell, DurableCellError } from "./DurableCell.ts"

const failed = (error: SqlError) => new DurableCellError({ store: "postgresql", reason: reasonOf(error) })

const makePostgresCell = Effect.gen(function*() {
  const { sql } = yield* Database
  return DurableCell.of({
    store: "postgresql",
    now: sql<{ readonly now: number }>`SELECT floor(extract(epoch from clock_timestamp()) * 1000)::float8 AS now`.pipe(
      Effect.map((rows) => Number(rows[0]!.now)),
      Effect.mapError(failed)
    ),
    get: (name) =>
      sql<{ readonly value: string }>`SELECT value FROM durable_cells WHERE name = ${name}`.pipe(
        Effect.map((rows) => rows[0]?.value),
        Effect.mapError(failed)
      ),
    compareAndSet: (name, expected, next) =>
      (expected === undefined
        ? sql`INSERT INTO durable_cells (name, value) VALUES (${name}, ${next}) ON CONFLICT (name) DO NOTHING RETURNING name`
        : sql`UPDATE durable_cells SET value = ${next}, updated_at = now() WHERE name = ${name} AND value = ${expected} RETURNING name`
      ).pipe(Effect.map((rows) => rows.length === 1), Effect.mapError(failed))
  })
})

/** On the process's one PostgreSQL pool (`Database.layer`, built once per application). */
export const layerPostgres: Layer.Layer<DurableCell, StartupFailure, AppConfig> = Layer.effect(DurableCell, makePostgresCell).pipe(
  Layer.provide(Database.layer)
)
