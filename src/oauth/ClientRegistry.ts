/**
 * The OAuth client registry (CONTRACT C6): client id, name, allowed scopes, how the client authenticates
 * (a keyed hash of its secret, or its public keys for private_key_jwt), status, timestamps. Backed by clients.json under DATA_DIR (clientsFile.ts), which the CLI edits and a
 * running server follows (ReloadingFile); with DATABASE_URL by PostgreSQL (store/), which every
 * instance and the CLI share; or by memory in tests.
 */
import { Clock, Context, Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { AppConfig } from "../config/AppConfig.ts"
import type { FileError } from "../platform/files.ts"
import * as ReloadingFile from "../platform/ReloadingFile.ts"
import type { StartupFailure } from "../lifecycle/StartupFailure.ts"
import { clientsState, openPepper } from "./store/clientsTable.ts"
import { OAuthDatabase } from "./store/Database.ts"
import { makePgState } from "./store/pgState.ts"
import type { DatabaseError, SharedState, StorageError } from "./store/SharedState.ts"
import {
  ClientsFile,
  emptyClientsFile,
  emptySnapshot,
  loadClients,
  type Snapshot,
  type StoredClient,
  storeClients
} from "./clientsFile.ts"
import { checkRegisteredJwks } from "./clientKeys.ts"
import { ClientAuthFailed, ClientNotFound, ClientRevoked, InvalidClientInput } from "./errors.ts"
import { type ClientAuth, type OAuthClient, SECRET_AUTH } from "./oauthClient.ts"
import { OAuthConfig } from "./OAuthConfig.ts"
import { canonicalScopes, isScope, type Scope, Scopes } from "./scopes.ts"
import {
  digestsEqual,
  loadPepper,
  makePepper,
  newClientId,
  newClientSecret,
  type Pepper,
  type PepperOrigin,
  randomToken
} from "./secrets.ts"

/** What `create` and `rotate` return: the secret exists only here, once. */
export interface IssuedCredentials {
  readonly client: OAuthClient
  readonly clientSecret: Redacted.Redacted<string>
}

export interface CreateClientInput {
  readonly name: string
  readonly scopes: ReadonlyArray<string>
  /** Normally generated. Tests pass ids with special characters to exercise RFC 6749 §2.3.1 decoding. */
  readonly clientId?: string
  /** Normally generated (256 bits). Tests may fix one. */
  readonly secret?: string
}

/** The public keys of a private_key_jwt client: a JWK Set held here, or the URL where the client publishes it. */
export type ClientKeysInput = { readonly jwks: unknown } | { readonly jwksUri: string }

/** A `private_key_jwt` client (RFC 7523): no secret, its public keys instead. */
export interface CreateKeyClientInput {
  readonly name: string
  readonly scopes: ReadonlyArray<string>
  readonly clientId?: string
  readonly keys: ClientKeysInput
}

export interface ClientRegistryShape {
  /** Where the hashing pepper came from; production start-up may refuse `generated`/`memory`. */
  readonly pepperOrigin: PepperOrigin
  readonly create: (input: CreateClientInput) => Effect.Effect<IssuedCredentials, InvalidClientInput | StorageError>
  /** Registers a `private_key_jwt` client; its keys are checked (public, usable, distinct kids). */
  readonly createWithKeys: (input: CreateKeyClientInput) => Effect.Effect<OAuthClient, InvalidClientInput | StorageError>
  /** New public keys (or jwks_uri) for a `private_key_jwt` client; assertions signed with the old ones stop working. */
  readonly replaceKeys: (
    clientId: string,
    keys: ClientKeysInput
  ) => Effect.Effect<OAuthClient, ClientNotFound | ClientRevoked | InvalidClientInput | StorageError>
  /** Reads the newest state (no throttle); never exposes hashes. */
  readonly list: () => Effect.Effect<ReadonlyArray<OAuthClient>, StorageError>
  /** Hot path (token verification): the cached state, refreshed at most once per reload interval. */
  readonly get: (clientId: string) => Effect.Effect<OAuthClient | undefined>
  /** Idempotent: revoking a revoked client returns it unchanged. */
  readonly revoke: (clientId: string) => Effect.Effect<OAuthClient, ClientNotFound | StorageError>
  /** New secret; the old one stops working at once. Tokens already issued stay valid until they expire. */
  readonly rotate: (
    clientId: string,
    options?: { readonly secret?: string }
  ) => Effect.Effect<IssuedCredentials, ClientNotFound | ClientRevoked | InvalidClientInput | StorageError>
  /**
   * Checks a client id and secret in constant time: the presented secret is always hashed and compared
   * with a 32-byte digest (the client's, or a random dummy for an unknown id or a private_key_jwt client),
   * and a revoked client is rejected only after the same work. Never fails for I/O: it uses the last good
   * registry state.
   */
  readonly authenticate: (
    clientId: string,
    secret: Redacted.Redacted<string>
  ) => Effect.Effect<OAuthClient, ClientAuthFailed>
}

export class ClientRegistry extends Context.Service<ClientRegistry, ClientRegistryShape>()("app/oauth/ClientRegistry") {
  /** PostgreSQL with DATABASE_URL, else the file under DATA_DIR. */
  static readonly layer: Layer.Layer<ClientRegistry, StorageError | StartupFailure, OAuthConfig | AppConfig> = Layer.unwrap(
    Effect.map(AppConfig, ({ databaseUrl }): Layer.Layer<ClientRegistry, StorageError | StartupFailure, OAuthConfig | AppConfig> =>
      databaseUrl === undefined ? ClientRegistry.layerFile : ClientRegistry.layerDatabase)
  )

  /** File-backed, from `OAuthConfig` (clients file, pepper). A broken file fails the layer. */
  static readonly layerFile: Layer.Layer<ClientRegistry, FileError, OAuthConfig> = Layer.effect(
    ClientRegistry,
    Effect.gen(function*() {
      const config = yield* OAuthConfig
      const pepper = yield* loadPepper({ configured: config.pepper, pepperFile: config.pepperFile })
      const file = yield* ReloadingFile.make({
        file: config.clientsFile,
        schema: ClientsFile,
        load: loadClients(pepper),
        store: storeClients(pepper),
        missing: { empty: emptyClientsFile(pepper) },
        reloadIntervalMs: config.reloadIntervalMs,
        label: "oauth client registry",
        describe: (snapshot) => ({ clients: snapshot.clients.size })
      })
      return makeRegistry(file, pepper)
    })
  )

  /**
   * In PostgreSQL (OAuthDatabase): every instance holds the registry in memory and follows its changes
   * (NOTIFY, else a 500 ms poll); the pepper is OAUTH_SECRET_PEPPER, or in development one kept there.
   */
  static readonly layerDatabase: Layer.Layer<ClientRegistry, DatabaseError | StartupFailure, OAuthConfig | AppConfig> = Layer.effect(
    ClientRegistry,
    Effect.gen(function*() {
      const db = yield* OAuthDatabase
      const pepper = yield* openPepper(db, (yield* OAuthConfig).pepper)
      return makeRegistry(yield* makePgState(db, clientsState(db, pepper)), pepper)
    })
  ).pipe(Layer.provide(OAuthDatabase.layer))

  /** In memory, with a random pepper; for tests. `clients` are created up front. */
  static readonly layerTest = (
    clients: ReadonlyArray<CreateClientInput | CreateKeyClientInput> = []
  ): Layer.Layer<ClientRegistry, InvalidClientInput> =>
    Layer.effect(
      ClientRegistry,
      Effect.gen(function*() {
        const pepper = makePepper(randomToken(32), "memory")
        const registry = makeRegistry(ReloadingFile.inMemory(emptySnapshot), pepper)
        // Memory never fails for storage; only bad input can.
        for (const c of clients) {
          const created: Effect.Effect<unknown, InvalidClientInput | StorageError> = "keys" in c
            ? registry.createWithKeys(c)
            : registry.create(c)
          yield* created.pipe(Effect.catchTags({ FileError: Effect.die, DatabaseError: Effect.die }))
        }
        return registry
      })
    )
}

// ---------------------------------------------------------------------------------------------------------
// Registry logic, over the file or memory alike.

type Step<A, E> = Effect.Effect<{ readonly next: Snapshot; readonly result: A }, E>

const CONTROL_CHARS = /[\u0000-\u001f\u007f]/

const validateName = (name: string): Effect.Effect<string, InvalidClientInput> => {
  const trimmed = name.trim()
  if (trimmed.length === 0) return Effect.fail(new InvalidClientInput({ field: "name", reason: "must not be empty" }))
  if (trimmed.length > 200) return Effect.fail(new InvalidClientInput({ field: "name", reason: "at most 200 characters" }))
  if (CONTROL_CHARS.test(trimmed)) {
    return Effect.fail(new InvalidClientInput({ field: "name", reason: "must not contain control characters" }))
  }
  return Effect.succeed(trimmed)
}

const validateScopes = (scopes: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<Scope>, InvalidClientInput> => {
  const unknown = scopes.filter((s) => !isScope(s))
  if (unknown.length > 0) {
    return Effect.fail(
      new InvalidClientInput({
        field: "scope",
        reason: `unknown scope ${unknown.map((s) => JSON.stringify(s)).join(", ")}; known: ${Scopes.join(" ")}`
      })
    )
  }
  if (scopes.length === 0) return Effect.fail(new InvalidClientInput({ field: "scope", reason: "at least one scope is required" }))
  return Effect.succeed(canonicalScopes(scopes as ReadonlyArray<Scope>))
}

/** Any string is a legal id (RFC 6749 clients form-encode it), except empty, over-long or control chars. */
const validateClientId = (id: string): Effect.Effect<string, InvalidClientInput> =>
  id.length === 0 || id.length > 256 || CONTROL_CHARS.test(id)
    ? Effect.fail(
      new InvalidClientInput({ field: "client_id", reason: "must be 1 to 256 characters without control characters" })
    )
    : Effect.succeed(id)

/** An absolute http(s) URL without credentials or fragment; https in production is the fetcher's rule (it knows APP_ENV). */
const validateJwksUri = (uri: string): Effect.Effect<string, InvalidClientInput> => {
  const bad = (reason: string) => Effect.fail(new InvalidClientInput({ field: "jwks_uri", reason }))
  if (uri.length > 2048 || !URL.canParse(uri)) return bad("must be an absolute URL of at most 2048 characters")
  const url = new URL(uri)
  if (url.protocol !== "https:" && url.protocol !== "http:") return bad("must be an https URL")
  if (url.username !== "" || url.password !== "" || url.hash !== "") return bad("must not hold credentials or a fragment")
  return Effect.succeed(url.href)
}

const validateKeys = (keys: ClientKeysInput): Effect.Effect<ClientAuth, InvalidClientInput> =>
  "jwksUri" in keys
    ? Effect.map(validateJwksUri(keys.jwksUri), (uri) => ({ method: "private_key_jwt", keys: { _tag: "Uri", uri } }))
    : checkRegisteredJwks(keys.jwks).pipe(
      Effect.mapError((reason) => new InvalidClientInput({ field: "jwks", reason })),
      Effect.map((jwks) => ({ method: "private_key_jwt", keys: { _tag: "Inline", jwks } }))
    )

const validateSecret = (secret: string): Effect.Effect<string, InvalidClientInput> =>
  secret.length === 0 || secret.length > 1024
    ? Effect.fail(new InvalidClientInput({ field: "client_secret", reason: "must be 1 to 1024 characters" }))
    : Effect.succeed(secret)

const publicView = (c: StoredClient): OAuthClient => ({
  clientId: c.clientId,
  name: c.name,
  scopes: c.scopes,
  status: c.status,
  createdAt: c.createdAt,
  rotatedAt: c.rotatedAt,
  auth: c.auth
})

const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

const withClient = (snapshot: Snapshot, client: StoredClient): Snapshot => {
  const clients = new Map(snapshot.clients)
  clients.set(client.clientId, client)
  return { clients }
}

const keyClient = new InvalidClientInput({
  field: "client_id",
  reason: "this client authenticates with private_key_jwt: it has no secret (give it new keys with --jwks-file or --jwks-uri)"
})
const secretClient = new InvalidClientInput({
  field: "client_id",
  reason: "this client authenticates with client_secret_basic: it has no keys (rotate its secret instead)"
})

const makeRegistry = (store: SharedState<Snapshot, StorageError>, pepper: Pepper): ClientRegistryShape => {
  // Compared against when the id is unknown, so that an unknown id costs the same hash + compare.
  const dummyHash = randomBytes(32)

  /** A new client under a fresh (or the requested, unused) id. */
  const insert = <A>(
    input: { readonly name: string; readonly scopes: ReadonlyArray<string>; readonly clientId?: string | undefined },
    credentials: Pick<StoredClient, "auth" | "secretHash">,
    result: (client: OAuthClient) => A
  ) =>
    Effect.gen(function*() {
      const name = yield* validateName(input.name)
      const scopes = yield* validateScopes(input.scopes)
      const requestedId = input.clientId === undefined ? undefined : yield* validateClientId(input.clientId)
      const createdAt = yield* nowIso
      return yield* store.modify((snapshot): Step<A, InvalidClientInput> => {
        let clientId = requestedId ?? newClientId()
        if (requestedId === undefined) while (snapshot.clients.has(clientId)) clientId = newClientId()
        else if (snapshot.clients.has(clientId)) {
          return Effect.fail(new InvalidClientInput({ field: "client_id", reason: "a client with this id exists" }))
        }
        const client: StoredClient = { clientId, name, scopes, status: "active", createdAt, rotatedAt: undefined, ...credentials }
        return Effect.succeed({ next: withClient(snapshot, client), result: result(publicView(client)) })
      })
    })

  const create: ClientRegistryShape["create"] = (input) =>
    Effect.gen(function*() {
      const secret = input.secret === undefined ? newClientSecret() : yield* validateSecret(input.secret)
      return yield* insert(input, { auth: SECRET_AUTH, secretHash: pepper.hash(secret) }, (client) => ({
        client,
        clientSecret: Redacted.make(secret, { label: "client_secret" })
      }))
    })

  const createWithKeys: ClientRegistryShape["createWithKeys"] = (input) =>
    Effect.flatMap(validateKeys(input.keys), (auth) => insert(input, { auth, secretHash: undefined }, (client) => client))

  const replaceKeys: ClientRegistryShape["replaceKeys"] = (clientId, keys) =>
    Effect.gen(function*() {
      const auth = yield* validateKeys(keys)
      const rotatedAt = yield* nowIso
      return yield* store.modify((snapshot): Step<OAuthClient, ClientNotFound | ClientRevoked | InvalidClientInput> => {
        const existing = snapshot.clients.get(clientId)
        if (existing === undefined) return Effect.fail(new ClientNotFound({ clientId }))
        if (existing.status === "revoked") return Effect.fail(new ClientRevoked({ clientId }))
        if (existing.auth.method !== "private_key_jwt") return Effect.fail(secretClient)
        const client: StoredClient = { ...existing, rotatedAt, auth }
        return Effect.succeed({ next: withClient(snapshot, client), result: publicView(client) })
      })
    })

  const revoke: ClientRegistryShape["revoke"] = (clientId) =>
    store.modify((snapshot): Step<OAuthClient, ClientNotFound> => {
      const existing = snapshot.clients.get(clientId)
      if (existing === undefined) return Effect.fail(new ClientNotFound({ clientId }))
      if (existing.status === "revoked") return Effect.succeed({ next: snapshot, result: publicView(existing) })
      const client: StoredClient = { ...existing, status: "revoked" }
      return Effect.succeed({ next: withClient(snapshot, client), result: publicView(client) })
    })

  const rotate: ClientRegistryShape["rotate"] = (clientId, options) =>
    Effect.gen(function*() {
      const secret = options?.secret === undefined ? newClientSecret() : yield* validateSecret(options.secret)
      const rotatedAt = yield* nowIso
      return yield* store.modify((snapshot): Step<IssuedCredentials, ClientNotFound | ClientRevoked | InvalidClientInput> => {
        const existing = snapshot.clients.get(clientId)
        if (existing === undefined) return Effect.fail(new ClientNotFound({ clientId }))
        if (existing.status === "revoked") return Effect.fail(new ClientRevoked({ clientId }))
        if (existing.auth.method !== "client_secret_basic") return Effect.fail(keyClient)
        const client: StoredClient = { ...existing, rotatedAt, secretHash: pepper.hash(secret) }
        return Effect.succeed({
          next: withClient(snapshot, client),
          result: { client: publicView(client), clientSecret: Redacted.make(secret, { label: "client_secret" }) }
        })
      })
    })

  const authenticate: ClientRegistryShape["authenticate"] = (clientId, secret) =>
    Effect.flatMap(store.get, (snapshot) => {
      const client = snapshot.clients.get(clientId)
      const presented = pepper.hash(Redacted.value(secret))
      // Same work on every path: one HMAC, one 32-byte constant-time compare, then the decision.
      const matches = digestsEqual(presented, client?.secretHash ?? dummyHash)
      if (client === undefined) return Effect.fail(new ClientAuthFailed({ reason: "unknown_client" }))
      if (client.auth.method !== "client_secret_basic") return Effect.fail(new ClientAuthFailed({ reason: "wrong_method" }))
      if (!matches) return Effect.fail(new ClientAuthFailed({ reason: "wrong_secret" }))
      if (client.status !== "active") return Effect.fail(new ClientAuthFailed({ reason: "revoked" }))
      return Effect.succeed(publicView(client))
    })

  return {
    pepperOrigin: pepper.origin,
    create,
    createWithKeys,
    replaceKeys,
    list: () =>
      Effect.map(
        store.latest,
        (s) => [...s.clients.values()].map(publicView).sort((a, b) => a.createdAt.localeCompare(b.createdAt))
      ),
    get: (clientId) =>
      Effect.map(store.get, (s) => {
        const c = s.clients.get(clientId)
        return c === undefined ? undefined : publicView(c)
      }),
    revoke,
    rotate,
    authenticate
  }
}
