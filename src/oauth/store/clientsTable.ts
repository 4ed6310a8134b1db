/**
 * The client registry in PostgreSQL (`oauth_clients`, src/database/migrations.ts): the same records and checks as
 * clients.json (the rows are decoded with its Schema, ../clientsFile.ts), and the pepper's fingerprint
 * in `oauth_settings`, so that hashes made with another pepper are refused, not half-used.
 */
import { Effect, Redacted, Result, Schema } from "effect"
import { issueText } from "../../platform/ReloadingFile.ts"
import { ClientsFile, loadClients, type Snapshot, type StoredClient } from "../clientsFile.ts"
import { encodeSecretHash, makePepper, type Pepper, randomToken } from "../secrets.ts"
import { databaseError, Locks, type OAuthDatabaseShape } from "./Database.ts"
import type { PgStateOptions } from "./pgState.ts"
import { DatabaseError } from "./SharedState.ts"

interface ClientRow {
  readonly client_id: string
  readonly name: string
  readonly scopes: ReadonlyArray<string>
  readonly secret_hash: string | null
  readonly token_endpoint_auth_method: string
  readonly jwks: unknown
  readonly jwks_uri: string | null
  readonly status: string
  readonly created_at: Date
  readonly rotated_at: Date | null
}

/**
 * The configured pepper (OAUTH_SECRET_PEPPER; required in production), else, in development, one kept
 * in `oauth_settings` (made by the first start), so that instances without a shared disk agree on it.
 */
export const openPepper = (
  db: OAuthDatabaseShape,
  configured: Redacted.Redacted<string> | undefined
): Effect.Effect<Pepper, DatabaseError> => {
  const { sql } = db
  return sql.withTransaction(Effect.gen(function*() {
    yield* sql`SELECT pg_advisory_xact_lock(${Locks.clients})`
    const rows = yield* sql<{ name: string; value: string }>`SELECT name, value FROM oauth_settings WHERE name IN ('pepper', 'pepper_id')`
    const stored = new Map(rows.map((r) => [r.name, r.value]))
    let pepper: Pepper
    if (configured !== undefined) pepper = makePepper(Redacted.value(configured), "configured")
    else if (stored.has("pepper")) pepper = makePepper(stored.get("pepper")!, "database")
    else {
      const value = randomToken(32)
      yield* sql`INSERT INTO oauth_settings (name, value) VALUES ('pepper', ${value})`
      pepper = makePepper(value, "generated")
    }
    if (!stored.has("pepper_id")) yield* sql`INSERT INTO oauth_settings (name, value) VALUES ('pepper_id', ${pepper.id})`
    return pepper
  })).pipe(Effect.mapError(databaseError("reading the secret pepper")))
}

const decodeFile = Schema.decodeUnknownResult(ClientsFile)

const load = (db: OAuthDatabaseShape, pepper: Pepper): Effect.Effect<Snapshot, DatabaseError> =>
  Effect.gen(function*() {
    const { sql } = db
    const [rows, pepperIds] = yield* Effect.all([
      sql<ClientRow>`SELECT client_id, name, scopes, secret_hash, token_endpoint_auth_method, jwks, jwks_uri, status,
        created_at, rotated_at FROM oauth_clients ORDER BY created_at, client_id`,
      sql<{ value: string }>`SELECT value FROM oauth_settings WHERE name = 'pepper_id'`
    ]).pipe(Effect.mapError(databaseError("reading the clients")))
    const content = decodeFile({
      version: 1,
      pepper_id: pepperIds[0]?.value ?? pepper.id,
      clients: rows.map((r) => ({
        client_id: r.client_id,
        name: r.name,
        scopes: r.scopes,
        ...(r.secret_hash === null ? {} : { secret_hash: r.secret_hash }),
        ...(r.token_endpoint_auth_method === "client_secret_basic" ? {} : { token_endpoint_auth_method: r.token_endpoint_auth_method }),
        ...(r.jwks === null ? {} : { jwks: r.jwks }),
        ...(r.jwks_uri === null ? {} : { jwks_uri: r.jwks_uri }),
        status: r.status,
        created_at: r.created_at.toISOString(),
        rotated_at: r.rotated_at === null ? null : r.rotated_at.toISOString()
      }))
    })
    if (Result.isFailure(content)) {
      return yield* new DatabaseError({ operation: "reading the clients", reason: issueText(content.failure.issue) })
    }
    return yield* Effect.mapError(loadClients(pepper)(content.success), (reason) => new DatabaseError({ operation: "reading the clients", reason }))
  })

const upsert = (db: OAuthDatabaseShape, c: StoredClient) => {
  const keys = c.auth.method === "private_key_jwt" ? c.auth.keys : undefined
  const jwks = keys?._tag === "Inline" ? JSON.stringify(keys.jwks) : null
  const jwksUri = keys?._tag === "Uri" ? keys.uri : null
  return db.sql`INSERT INTO oauth_clients (client_id, name, scopes, secret_hash, token_endpoint_auth_method, jwks, jwks_uri,
      status, created_at, rotated_at)
    VALUES (${c.clientId}, ${c.name}, ${c.scopes}::text[], ${c.secretHash === undefined ? null : encodeSecretHash(c.secretHash)},
      ${c.auth.method}, ${jwks}::jsonb, ${jwksUri}, ${c.status}, ${c.createdAt}::timestamptz, ${c.rotatedAt ?? null}::timestamptz)
    ON CONFLICT (client_id) DO UPDATE SET name = EXCLUDED.name, scopes = EXCLUDED.scopes,
      secret_hash = EXCLUDED.secret_hash, token_endpoint_auth_method = EXCLUDED.token_endpoint_auth_method,
      jwks = EXCLUDED.jwks, jwks_uri = EXCLUDED.jwks_uri, status = EXCLUDED.status, created_at = EXCLUDED.created_at,
      rotated_at = EXCLUDED.rotated_at`
}

/** Rows whose record changed (a new object) are written; rows gone from `next` are deleted. */
const save = (db: OAuthDatabaseShape) => (current: Snapshot, next: Snapshot) =>
  Effect.gen(function*() {
    for (const id of current.clients.keys()) {
      if (!next.clients.has(id)) yield* db.sql`DELETE FROM oauth_clients WHERE client_id = ${id}`
    }
    for (const [id, client] of next.clients) {
      if (current.clients.get(id) !== client) yield* upsert(db, client)
    }
  })

export const clientsState = (db: OAuthDatabaseShape, pepper: Pepper): PgStateOptions<Snapshot> => ({
  name: "clients",
  lockKey: Locks.clients,
  label: "oauth client registry",
  load: load(db, pepper),
  save: save(db),
  describe: (snapshot) => ({ clients: snapshot.clients.size })
})
