/**
 * Kept history in PostgreSQL (src/database/migrations.ts "2_rates_history"): a row per day (first write wins unless the held
 * one is no price), a coverage row per series (the hull); days as integers since 1970-01-01. DailyHistory validates reads.
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { DatabaseShape } from "../../database/Database.ts"
import { DAY_MS, type SeriesStore, type StoredSeries } from "../dailySeries.ts"

interface Row {
  readonly covered_from: number
  readonly covered_to: number
  readonly day: number | null
  readonly price: number | string | null
}

export const makePostgresStore = ({ sql }: DatabaseShape): SeriesStore<SqlError> => ({
  // One statement: coverage and points from the same snapshot.
  read: ({ coin, currency, source }) =>
    sql<Row>`SELECT c.covered_from - DATE '1970-01-01' AS covered_from, c.covered_to - DATE '1970-01-01' AS covered_to,
        p.day - DATE '1970-01-01' AS day, p.price
      FROM rates_daily_coverage c
      LEFT JOIN rates_daily_points p ON p.coin = c.coin AND p.currency = c.currency AND p.source = c.source
        AND p.day BETWEEN c.covered_from AND c.covered_to
      WHERE c.coin = ${coin} AND c.currency = ${currency} AND c.source = ${source}
      ORDER BY p.day`.pipe(
      Effect.map((rows): StoredSeries | undefined => {
        const first = rows[0]
        if (first === undefined) return undefined
        const points: Array<readonly [unknown, unknown]> = []
        for (const row of rows) if (row.day !== null) points.push([row.day * DAY_MS, row.price === null ? null : Number(row.price)])
        return { coveredFrom: first.covered_from * DAY_MS, coveredTo: first.covered_to * DAY_MS, points }
      })
    ),
  write: ({ coin, currency, source }, series) => {
    // As text: the driver infers an array's type from its elements; a double's shortest decimal reads back the same.
    const days = series.points.map(([day]) => String(day / DAY_MS))
    const prices = series.points.map(([, price]) => String(price))
    return sql.withTransaction(Effect.gen(function*() {
      if (days.length > 0) {
        yield* sql`INSERT INTO rates_daily_points (coin, currency, source, day, price)
          SELECT ${coin}, ${currency}, ${source}, DATE '1970-01-01' + d, p
          FROM unnest(${days}::text[]::int[], ${prices}::text[]::float8[]) AS t(d, p)
          ON CONFLICT (coin, currency, source, day) DO UPDATE SET price = EXCLUDED.price
          WHERE NOT (rates_daily_points.price > 0 AND rates_daily_points.price < 'Infinity')`
      }
      yield* sql`INSERT INTO rates_daily_coverage (coin, currency, source, covered_from, covered_to)
        VALUES (${coin}, ${currency}, ${source}, DATE '1970-01-01' + ${series.coveredFrom / DAY_MS}::int,
          DATE '1970-01-01' + ${series.coveredTo / DAY_MS}::int)
        ON CONFLICT (coin, currency, source) DO UPDATE SET
          covered_from = LEAST(rates_daily_coverage.covered_from, EXCLUDED.covered_from),
          covered_to = GREATEST(rates_daily_coverage.covered_to, EXCLUDED.covered_to)`
    }))
  }
})
