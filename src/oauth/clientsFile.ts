/**
 * The client registry file, `$DATA_DIR/oauth/clients.json` (or OAUTH_CLIENTS_FILE): hashes only, never
 * secrets. Strict: a hand-edited file with a mistake is reported, not half-loaded.
 */
import { Effect, Schema } from "effect"
import { TokenEndpointAuthMethods } from "../api/schemas.ts"
import { ClientJwks } from "./clientKeys.ts"
import { type ClientAuth, ClientStatuses, type OAuthClient, SECRET_AUTH } from "./oauthClient.ts"
import { canonicalScopes, ScopeSchema } from "./scopes.ts"
import { decodeSecretHash, encodeSecretHash, type Pepper } from "./secrets.ts"

/** What the registry holds per client; the hash never leaves the registry. `undefined` for a key client. */
export interface StoredClient extends OAuthClient {
  readonly secretHash: Buffer | undefined
}

export interface Snapshot {
  readonly clients: ReadonlyMap<string, StoredClient>
}

export const emptySnapshot: Snapshot = { clients: new Map() }

const IsoDate = Schema.String.check(
  Schema.isPattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/, { expected: "an ISO date in UTC" })
)

const SecretHash = Schema.String.check(
  Schema.makeFilter((s: string) => decodeSecretHash(s) !== undefined, { expected: "hmac-sha256:<32 bytes, base64url>" })
)

/**
 * `token_endpoint_auth_method` absent is `client_secret_basic` (registries written before private_key_jwt):
 * such a client has a `secret_hash`; a `private_key_jwt` client has `jwks` or `jwks_uri` instead.
 */
const ClientRecord = Schema.Struct({
  client_id: Schema.String.check(Schema.isMinLength(1)),
  name: Schema.String,
  scopes: Schema.Array(ScopeSchema).check(Schema.isMinLength(1)),
  secret_hash: Schema.optionalKey(SecretHash),
  token_endpoint_auth_method: Schema.optionalKey(Schema.Literals(TokenEndpointAuthMethods)),
  jwks: Schema.optionalKey(ClientJwks),
  jwks_uri: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1))),
  status: Schema.Literals(ClientStatuses),
  created_at: IsoDate,
  rotated_at: Schema.NullOr(IsoDate)
}).check(Schema.makeFilter((r) => {
  const keyed = r.token_endpoint_auth_method === "private_key_jwt"
  if (!keyed) return r.secret_hash !== undefined && r.jwks === undefined && r.jwks_uri === undefined ||
    "a client_secret_basic client has a secret_hash and no jwks or jwks_uri"
  return r.secret_hash === undefined && (r.jwks === undefined) !== (r.jwks_uri === undefined) ||
    "a private_key_jwt client has either jwks or jwks_uri, and no secret_hash"
}))
type ClientRecord = typeof ClientRecord.Type

const authOf = (r: ClientRecord): ClientAuth =>
  r.token_endpoint_auth_method !== "private_key_jwt"
    ? SECRET_AUTH
    : r.jwks !== undefined
    ? { method: "private_key_jwt", keys: { _tag: "Inline", jwks: r.jwks } }
    : { method: "private_key_jwt", keys: { _tag: "Uri", uri: r.jwks_uri! } }

/** The record's authentication members (none of them for a secret client, as files were written before). */
const authRecord = (c: StoredClient) =>
  c.auth.method === "client_secret_basic"
    ? { secret_hash: encodeSecretHash(c.secretHash!) }
    : {
      token_endpoint_auth_method: c.auth.method,
      ...(c.auth.keys._tag === "Inline" ? { jwks: c.auth.keys.jwks } : { jwks_uri: c.auth.keys.uri })
    }

const uniqueClientIds = Schema.makeFilter((clients: ReadonlyArray<typeof ClientRecord.Type>) => {
  const seen = new Set<string>()
  for (const [i, c] of clients.entries()) {
    if (seen.has(c.client_id)) return { path: [i, "client_id"], issue: "a duplicate client id" }
    seen.add(c.client_id)
  }
  return undefined
})

/** Version 1. `pepper_id` fingerprints the pepper the hashes were made with. */
export const ClientsFile = Schema.Struct({
  version: Schema.Literal(1),
  pepper_id: Schema.String,
  clients: Schema.Array(ClientRecord).check(uniqueClientIds)
})
export type ClientsFile = typeof ClientsFile.Type

export const emptyClientsFile = (pepper: Pepper): ClientsFile => ({ version: 1, pepper_id: pepper.id, clients: [] })

export const loadClients = (pepper: Pepper) => (content: ClientsFile): Effect.Effect<Snapshot, string> => {
  if (content.pepper_id !== pepper.id) {
    return Effect.fail(
      "the registry was hashed with a different secret pepper (OAUTH_SECRET_PEPPER or DATA_DIR/oauth/pepper); " +
        "use the same pepper as when the clients were created"
    )
  }
  const clients = new Map<string, StoredClient>()
  for (const r of content.clients) {
    clients.set(r.client_id, {
      clientId: r.client_id,
      name: r.name,
      scopes: canonicalScopes(r.scopes),
      secretHash: r.secret_hash === undefined ? undefined : decodeSecretHash(r.secret_hash)!, // checked by SecretHash
      status: r.status,
      createdAt: r.created_at,
      rotatedAt: r.rotated_at ?? undefined,
      auth: authOf(r)
    })
  }
  return Effect.succeed({ clients })
}

export const storeClients = (pepper: Pepper) => (snapshot: Snapshot): ClientsFile => ({
  version: 1,
  pepper_id: pepper.id,
  clients: [...snapshot.clients.values()].map((c) => ({
    client_id: c.clientId,
    name: c.name,
    scopes: c.scopes,
    ...authRecord(c),
    status: c.status,
    created_at: c.createdAt,
    rotated_at: c.rotatedAt ?? null
  }))
})
