/**
 * The signing keys in PostgreSQL (`oauth_signing_keys`, ./migrations.ts): the same entries and checks
 * as signing-keys.json (rows decoded with its Schema, ../signingKeysFile.ts). The signing key is the
 * row without `retired_at`, the only one holding a private part.
 */
import { Effect, Result, Schema } from "effect"
import { issueText } from "../../platform/ReloadingFile.ts"
import { isPrivate, type KeyEntry, publicPart } from "../keyMaterial.ts"
import { type Keys, loadKeys, SigningKeysFile } from "../signingKeysFile.ts"
import { databaseError, Locks, type OAuthDatabaseShape } from "./Database.ts"
import type { PgStateOptions } from "./pgState.ts"
import { DatabaseError } from "./SharedState.ts"

interface KeyRow {
  readonly kid: string
  readonly public_jwk: Record<string, unknown>
  readonly private_d: string | null
  readonly created_at: Date
  readonly retired_at: Date | null
}

const decodeFile = Schema.decodeUnknownResult(SigningKeysFile)

const load = (db: OAuthDatabaseShape): Effect.Effect<Keys, DatabaseError> =>
  Effect.gen(function*() {
    const rows = yield* db.sql<KeyRow>`SELECT kid, public_jwk, private_d, created_at, retired_at FROM oauth_signing_keys
      ORDER BY (retired_at IS NULL) DESC, created_at DESC, kid`.pipe(Effect.mapError(databaseError("reading the signing keys")))
    const content = decodeFile({
      version: 1,
      keys: rows.map((r) => ({
        jwk: { ...r.public_jwk, kid: r.kid, ...(r.private_d === null ? {} : { d: r.private_d }) },
        created_at: r.created_at.toISOString(),
        retired_at: r.retired_at === null ? null : r.retired_at.toISOString()
      }))
    })
    if (Result.isFailure(content)) {
      return yield* new DatabaseError({ operation: "reading the signing keys", reason: issueText(content.failure.issue) })
    }
    return yield* Effect.mapError(loadKeys(content.success), (reason) => new DatabaseError({ operation: "reading the signing keys", reason }))
  })

const columns = (e: KeyEntry) => ({
  jwk: JSON.stringify(publicPart(e.jwk)),
  d: isPrivate(e.jwk) ? e.jwk.d : null,
  retiredAt: e.retiredAt ?? null
})

/** Deleted, then changed, then new rows: the old signing key is retired before the new one is inserted. */
const save = (db: OAuthDatabaseShape) => (current: Keys, next: Keys) =>
  Effect.gen(function*() {
    const { sql } = db
    const before = new Map(current.entries.map((e) => [e.jwk.kid, e]))
    const after = new Set(next.entries.map((e) => e.jwk.kid))
    for (const kid of before.keys()) if (!after.has(kid)) yield* sql`DELETE FROM oauth_signing_keys WHERE kid = ${kid}`
    for (const e of next.entries) {
      const old = before.get(e.jwk.kid)
      if (old === undefined || old === e) continue
      const c = columns(e)
      yield* sql`UPDATE oauth_signing_keys SET public_jwk = ${c.jwk}::jsonb, private_d = ${c.d},
        created_at = ${e.createdAt}::timestamptz, retired_at = ${c.retiredAt}::timestamptz WHERE kid = ${e.jwk.kid}`
    }
    for (const e of next.entries) if (!before.has(e.jwk.kid)) yield* insert(db, e)
  })

const insert = (db: OAuthDatabaseShape, e: KeyEntry) => {
  const c = columns(e)
  return db.sql`INSERT INTO oauth_signing_keys (kid, public_jwk, private_d, created_at, retired_at)
    VALUES (${e.jwk.kid}, ${c.jwk}::jsonb, ${c.d}, ${e.createdAt}::timestamptz, ${c.retiredAt}::timestamptz)`
}

/** The first start (of any instance) makes the first key, under the lock: starting together, they agree. */
export const ensureSigningKey = (db: OAuthDatabaseShape, fresh: Effect.Effect<KeyEntry>): Effect.Effect<boolean, DatabaseError> =>
  db.sql.withTransaction(Effect.gen(function*() {
    yield* db.sql`SELECT pg_advisory_xact_lock(${Locks.signingKeys})`
    const [row] = yield* db.sql<{ n: number }>`SELECT count(*)::int AS n FROM oauth_signing_keys`
    if ((row?.n ?? 0) > 0) return false
    yield* insert(db, yield* fresh)
    return true
  })).pipe(Effect.mapError(databaseError("creating the first signing key")))

export const keysState = (db: OAuthDatabaseShape, created: boolean): PgStateOptions<Keys> => ({
  name: "signing_keys",
  lockKey: Locks.signingKeys,
  label: "oauth signing keys",
  load: load(db),
  save: save(db),
  created,
  describe: ({ state }) => ({ kid: state.signing.kid, published: state.jwks.keys.length })
})
