/**
 * The PostgreSQL schema, as one ordered record of versioned migrations (Effect SQL's Migrator; applied
 * at start-up by ./Database.ts) for every capability that keeps state there. A migration, once
 * released, is never edited: a change is a new one, numbered after the last.
 *
 * 1_oauth: the OAuth state (src/oauth/store). Every change to the clients or the keys, by an instance, the CLI or a hand-written statement, bumps
 * the table's row in `oauth_versions` and sends NOTIFY oauth_changes (payload: that name) on commit,
 * which is how every instance learns of it (LISTEN, or polling the versions).
 */
import { Effect } from "effect"
import * as Migrator from "effect/sql/Migrator"
import { SqlClient } from "effect/sql/SqlClient"

/** Statements run one by one (a prepared statement holds one command). */
const statements = (list: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    for (const statement of list) yield* sql.unsafe(statement)
  })

const oauth = statements([
  `CREATE TABLE oauth_clients (
    client_id text PRIMARY KEY,
    name text NOT NULL,
    scopes text[] NOT NULL,
    secret_hash text NOT NULL,
    status text NOT NULL CHECK (status IN ('active', 'revoked')),
    created_at timestamptz NOT NULL,
    rotated_at timestamptz
  )`,
  // The signing key is the one row without retired_at; only it keeps its private part.
  `CREATE TABLE oauth_signing_keys (
    kid text PRIMARY KEY,
    public_jwk jsonb NOT NULL,
    private_d text,
    created_at timestamptz NOT NULL,
    retired_at timestamptz,
    CHECK ((retired_at IS NULL) = (private_d IS NOT NULL))
  )`,
  `CREATE UNIQUE INDEX oauth_signing_keys_one_signing ON oauth_signing_keys ((true)) WHERE retired_at IS NULL`,
  // pepper_id: fingerprint of the pepper the hashes were made with; pepper: only when not configured (development).
  `CREATE TABLE oauth_settings (name text PRIMARY KEY, value text NOT NULL)`,
  `CREATE TABLE oauth_versions (name text PRIMARY KEY, version bigint NOT NULL)`,
  `INSERT INTO oauth_versions (name, version) VALUES ('clients', 0), ('signing_keys', 0)`,
  `CREATE FUNCTION oauth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    UPDATE oauth_versions SET version = version + 1 WHERE name = TG_ARGV[0];
    PERFORM pg_notify('oauth_changes', TG_ARGV[0]);
    RETURN NULL;
  END $$`,
  `CREATE TRIGGER oauth_clients_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON oauth_clients
    FOR EACH STATEMENT EXECUTE FUNCTION oauth_changed('clients')`,
  `CREATE TRIGGER oauth_signing_keys_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON oauth_signing_keys
    FOR EACH STATEMENT EXECUTE FUNCTION oauth_changed('signing_keys')`
])

/**
 * 2_rates_history: the daily points of closed days (src/rates/history/postgresHistory.ts), written once
 * and never changed, and per series the range of days already asked of the source (with or without a
 * point), so that only the days outside it are fetched.
 */
const ratesHistory = statements([
  `CREATE TABLE rates_daily_points (
    coin text NOT NULL,
    currency text NOT NULL,
    source text NOT NULL,
    day date NOT NULL,
    price double precision NOT NULL,
    PRIMARY KEY (coin, currency, source, day)
  )`,
  `CREATE TABLE rates_daily_coverage (
    coin text NOT NULL,
    currency text NOT NULL,
    source text NOT NULL,
    covered_from date NOT NULL,
    covered_to date NOT NULL,
    PRIMARY KEY (coin, currency, source),
    CHECK (covered_from <= covered_to)
  )`
])

/**
 * Small named values every instance shares, read and replaced by compare-and-set
 * (src/platform/durableCell/postgres.ts): the month's credit ledger of the rates upstream.
 */
const durableCells = statements([
  `CREATE TABLE durable_cells (
    name text PRIMARY KEY,
    value text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
  )`
])

/**
 * 4_oauth_client_auth: one client authentication method per client (RFC 7591 `token_endpoint_auth_method`,
 * src/oauth/oauthClient.ts): existing clients are `client_secret_basic`; a `private_key_jwt` client has
 * public keys (`jwks`) or a `jwks_uri` instead of a secret hash.
 */
const oauthClientAuth = statements([
  `ALTER TABLE oauth_clients
    ADD COLUMN token_endpoint_auth_method text NOT NULL DEFAULT 'client_secret_basic'
      CHECK (token_endpoint_auth_method IN ('client_secret_basic', 'private_key_jwt')),
    ADD COLUMN jwks jsonb,
    ADD COLUMN jwks_uri text,
    ALTER COLUMN secret_hash DROP NOT NULL,
    ADD CONSTRAINT oauth_clients_one_method CHECK (CASE token_endpoint_auth_method
      WHEN 'client_secret_basic' THEN secret_hash IS NOT NULL AND jwks IS NULL AND jwks_uri IS NULL
      ELSE secret_hash IS NULL AND (jwks IS NULL) <> (jwks_uri IS NULL) END)`
])

const loader = Migrator.fromRecord({
  "1_oauth": oauth,
  "2_rates_history": ratesHistory,
  "3_durable_cells": durableCells,
  "4_oauth_client_auth": oauthClientAuth
})

/** The table recording applied migrations. */
const migrationsTable = "crypto_api_migrations"

/** Applies what is pending; needs the caller to hold the migration lock (./Database.ts). */
export const migrate = Migrator.make({})({ loader, table: migrationsTable })
