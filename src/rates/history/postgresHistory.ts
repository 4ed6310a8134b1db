/**
 * `DailyHistory` in PostgreSQL (tables of src/database/migrations.ts "2_rates_history"), on the
 * process's one pool: `rates_daily_points` one row per day (INSERT ... ON CONFLICT DO NOTHING: the
 * first write wins), `rates_daily_coverage` one row per series (the hull, LEAST/GREATEST, in the same
 * statement as its upsert). Days travel as integers (days since 1970-01-01), never as local dates.
 */
import { Effect, Layer, Option } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { AppConfig } from "../../config/AppConfig.ts"
import { Database, reasonOf } from "../../database/Database.ts"
import type { StartupFailure } from "../../startup.ts"
import { DAY_MS } from "../dailySeries.ts"
import { DailyHistory, HistoryError } from "./DailyHistory.ts"

interface Row {
  readonly covered_from: number
  readonly covered_to: number
  readonly day: number | null
  readonly price: number | null
}

const failed = (operation: string) => (error: SqlError) => new HistoryError({ operation: `PostgreSQL: ${operation}`, reason: reasonOf(error) })

export const makePostgresHistory = Effect.gen(function*() {
  const { sql } = yield* Database
  return DailyHistory.of({
    // One statement: coverage and points from the same snapshot.
    read: (coin, currency, source) =>
      sql<Row>`SELECT c.covered_from - DATE '1970-01-01' AS covered_from, c.covered_to - DATE '1970-01-01' AS covered_to,
          p.day - DATE '1970-01-01' AS day, p.price
        FROM rates_daily_coverage c
        LEFT JOIN rates_daily_points p ON p.coin = c.coin AND p.currency = c.currency AND p.source = c.source
          AND p.day BETWEEN c.covered_from AND c.covered_to
        WHERE c.coin = ${coin} AND c.currency = ${currency} AND c.source = ${source}
        ORDER BY p.day`.pipe(
        Effect.map((rows) => {
          const first = rows[0]
          if (first === undefined) return Option.none()
          const points: Array<readonly [number, number]> = []
          for (const row of rows) if (row.day !== null && row.price !== null) points.push([row.day * DAY_MS, Number(row.price)])
          return Option.some({ coveredFrom: first.covered_from * DAY_MS, coveredTo: first.covered_to * DAY_MS, points })
        }),
        Effect.mapError(failed("reading"))
      ),
    write: (coin, currency, source, series) => {
      const inside = series.points.filter(([day]) => day >= series.coveredFrom && day <= series.coveredTo && day % DAY_MS === 0)
      // As text: the driver infers an array's type from its elements, and the shortest decimal form
      // of a double reads back as the same double.
      const days = inside.map(([day]) => String(day / DAY_MS))
      const prices = inside.map(([, price]) => String(price))
      return sql.withTransaction(Effect.gen(function*() {
        if (days.length > 0) {
          yield* sql`INSERT INTO rates_daily_points (coin, currency, source, day, price)
            SELECT ${coin}, ${currency}, ${source}, DATE '1970-01-01' + d, p
            FROM unnest(${days}::text[]::int[], ${prices}::text[]::float8[]) AS t(d, p)
            ON CONFLICT DO NOTHING`
        }
        yield* sql`INSERT INTO rates_daily_coverage (coin, currency, source, covered_from, covered_to)
          VALUES (${coin}, ${currency}, ${source}, DATE '1970-01-01' + ${series.coveredFrom / DAY_MS}::int,
            DATE '1970-01-01' + ${series.coveredTo / DAY_MS}::int)
          ON CONFLICT (coin, currency, source) DO UPDATE SET
            covered_from = LEAST(rates_daily_coverage.covered_from, EXCLUDED.covered_from),
            covered_to = GREATEST(rates_daily_coverage.covered_to, EXCLUDED.covered_to)`
      })).pipe(Effect.mapError(failed("writing")))
    }
  })
})

/** On the process's one pool (`Database.layer`, built once whoever provides it). */
export const layerPostgres: Layer.Layer<DailyHistory, StartupFailure, AppConfig> = Layer.effect(DailyHistory, makePostgresHistory).pipe(
  Layer.provide(Database.layer)
)
