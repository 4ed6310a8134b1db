/**
 * The OAuth client registry (CONTRACT C6): client id, name, allowed scopes, keyed hash of the secret,
 * status, timestamps. Backed by a JSON file under DATA_DIR that the CLI edits and a running server
 * re-reads when it changes (checked at most once per `reloadIntervalMs`, by inode/mtime/size), or by
 * memory in tests.
 *
 * File format (`version` 1):
 * `{"version":1,"pepper_id":"…","clients":[{"client_id","name","scopes":[…],"secret_hash":"hmac-sha256:…",
 *   "status":"active"|"revoked","created_at":ISO,"rotated_at":ISO|null}]}`
 */
import { Clock, Context, Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import {
  ClientAuthFailed,
  ClientNotFound,
  ClientRevoked,
  InvalidClientInput,
  OAuthStorageError
} from "./errors.ts"
import { ensureDir, fileSignature, readTextIfExists, withFileLock, writeFileAtomic } from "./files.ts"
import { OAuthConfig } from "./OAuthConfig.ts"
import { canonicalScopes, isScope, type Scope } from "./scopes.ts"
import {
  decodeSecretHash,
  digestsEqual,
  encodeSecretHash,
  loadPepper,
  makePepper,
  newClientId,
  newClientSecret,
  type Pepper,
  type PepperOrigin,
  randomToken
} from "./secrets.ts"

export type ClientStatus = "active" | "revoked"

/** A registered client as everybody but the registry sees it: no hash, no secret. */
export interface OAuthClient {
  readonly clientId: string
  readonly name: string
  readonly scopes: ReadonlyArray<Scope>
  readonly status: ClientStatus
  readonly createdAt: string
  readonly rotatedAt: string | undefined
}

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

export interface ClientRegistryShape {
  /** Where the hashing pepper came from; production start-up may refuse `generated`/`memory`. */
  readonly pepperOrigin: PepperOrigin
  readonly create: (input: CreateClientInput) => Effect.Effect<IssuedCredentials, InvalidClientInput | OAuthStorageError>
  /** Reads the newest state (no throttle); never exposes hashes. */
  readonly list: () => Effect.Effect<ReadonlyArray<OAuthClient>, OAuthStorageError>
  /** Hot path (token verification): the cached state, refreshed at most once per reload interval. */
  readonly get: (clientId: string) => Effect.Effect<OAuthClient | undefined>
  /** Idempotent: revoking a revoked client returns it unchanged. */
  readonly revoke: (clientId: string) => Effect.Effect<OAuthClient, ClientNotFound | OAuthStorageError>
  /** New secret; the old one stops working at once. Tokens already issued stay valid until they expire. */
  readonly rotate: (
    clientId: string,
    options?: { readonly secret?: string }
  ) => Effect.Effect<IssuedCredentials, ClientNotFound | ClientRevoked | InvalidClientInput | OAuthStorageError>
  /**
   * Checks a client id and secret in constant time: the presented secret is always hashed and compared
   * with a 32-byte digest (the client's, or a random dummy for an unknown id), and a revoked client is
   * rejected only after the same work. Never fails for I/O: it uses the last good registry state.
   */
  readonly authenticate: (
    clientId: string,
    secret: Redacted.Redacted<string>
  ) => Effect.Effect<OAuthClient, ClientAuthFailed>
}

export class ClientRegistry extends Context.Service<ClientRegistry, ClientRegistryShape>()("app/oauth/ClientRegistry") {
  /** File-backed, from `OAuthConfig` (clients file, pepper). */
  static readonly layer: Layer.Layer<ClientRegistry, OAuthStorageError, OAuthConfig> = Layer.effect(
    ClientRegistry,
    Effect.gen(function*() {
      const config = yield* OAuthConfig
      const pepper = yield* loadPepper({ configured: config.pepper, pepperFile: config.pepperFile })
      const backend = yield* fileBackend(config.clientsFile, pepper, config.reloadIntervalMs)
      return makeRegistry(backend, pepper)
    })
  )

  /** In memory, with a random pepper; for HTTP tests. `clients` are created up front. */
  static readonly layerMemory = (
    clients: ReadonlyArray<CreateClientInput> = []
  ): Layer.Layer<ClientRegistry, InvalidClientInput> =>
    Layer.effect(
      ClientRegistry,
      Effect.gen(function*() {
        const pepper = makePepper(randomToken(32), "memory")
        const registry = makeRegistry(memoryBackend(), pepper)
        // The memory backend never fails for storage; only bad input can.
        for (const c of clients) yield* registry.create(c).pipe(Effect.catchTag("OAuthStorageError", (e) => Effect.die(e)))
        return registry
      })
    )
}

// ---------------------------------------------------------------------------------------------------------
// Registry logic, shared by the file and memory backends.

interface StoredClient extends OAuthClient {
  readonly secretHash: Buffer
}

interface Snapshot {
  readonly clients: ReadonlyMap<string, StoredClient>
}

const emptySnapshot: Snapshot = { clients: new Map() }

interface Backend {
  /** `force`: ignore the reload throttle. Never fails: on a read error it keeps the last good state. */
  readonly current: (force: boolean) => Effect.Effect<Snapshot>
  /** Read-modify-write of the newest state, serialised against other writers. */
  readonly update: <A, E>(
    f: (snapshot: Snapshot) => Effect.Effect<{ readonly next: Snapshot; readonly result: A }, E>
  ) => Effect.Effect<A, E | OAuthStorageError>
}

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
        reason: `unknown scope ${unknown.map((s) => JSON.stringify(s)).join(", ")}; known: health:read rates:read subscriptions:write`
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
  rotatedAt: c.rotatedAt
})

const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

const withClient = (snapshot: Snapshot, client: StoredClient): Snapshot => {
  const clients = new Map(snapshot.clients)
  clients.set(client.clientId, client)
  return { clients }
}

const makeRegistry = (backend: Backend, pepper: Pepper): ClientRegistryShape => {
  // Compared against when the id is unknown, so that an unknown id costs the same hash + compare.
  const dummyHash = randomBytes(32)

  const create: ClientRegistryShape["create"] = (input) =>
    Effect.gen(function*() {
      const name = yield* validateName(input.name)
      const scopes = yield* validateScopes(input.scopes)
      const requestedId = input.clientId === undefined ? undefined : yield* validateClientId(input.clientId)
      const secret = input.secret === undefined ? newClientSecret() : yield* validateSecret(input.secret)
      const createdAt = yield* nowIso
      return yield* backend.update((snapshot): Step<IssuedCredentials, InvalidClientInput> => {
        let clientId = requestedId ?? newClientId()
        if (requestedId === undefined) while (snapshot.clients.has(clientId)) clientId = newClientId()
        else if (snapshot.clients.has(clientId)) {
          return Effect.fail(new InvalidClientInput({ field: "client_id", reason: "a client with this id exists" }))
        }
        const client: StoredClient = {
          clientId,
          name,
          scopes,
          status: "active",
          createdAt,
          rotatedAt: undefined,
          secretHash: pepper.hash(secret)
        }
        return Effect.succeed({
          next: withClient(snapshot, client),
          result: { client: publicView(client), clientSecret: Redacted.make(secret, { label: "client_secret" }) }
        })
      })
    })

  const revoke: ClientRegistryShape["revoke"] = (clientId) =>
    backend.update((snapshot): Step<OAuthClient, ClientNotFound> => {
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
      return yield* backend.update((snapshot): Step<IssuedCredentials, ClientNotFound | ClientRevoked> => {
        const existing = snapshot.clients.get(clientId)
        if (existing === undefined) return Effect.fail(new ClientNotFound({ clientId }))
        if (existing.status === "revoked") return Effect.fail(new ClientRevoked({ clientId }))
        const client: StoredClient = { ...existing, rotatedAt, secretHash: pepper.hash(secret) }
        return Effect.succeed({
          next: withClient(snapshot, client),
          result: { client: publicView(client), clientSecret: Redacted.make(secret, { label: "client_secret" }) }
        })
      })
    })

  const authenticate: ClientRegistryShape["authenticate"] = (clientId, secret) =>
    Effect.flatMap(backend.current(false), (snapshot) => {
      const client = snapshot.clients.get(clientId)
      const presented = pepper.hash(Redacted.value(secret))
      // Same work on every path: one HMAC, one 32-byte constant-time compare, then the decision.
      const matches = digestsEqual(presented, client?.secretHash ?? dummyHash)
      if (client === undefined) return Effect.fail(new ClientAuthFailed({ reason: "unknown_client" }))
      if (!matches) return Effect.fail(new ClientAuthFailed({ reason: "wrong_secret" }))
      if (client.status !== "active") return Effect.fail(new ClientAuthFailed({ reason: "revoked" }))
      return Effect.succeed(publicView(client))
    })

  return {
    pepperOrigin: pepper.origin,
    create,
    list: () =>
      Effect.map(
        backend.current(true),
        (s) => [...s.clients.values()].map(publicView).sort((a, b) => a.createdAt.localeCompare(b.createdAt))
      ),
    get: (clientId) =>
      Effect.map(backend.current(false), (s) => {
        const c = s.clients.get(clientId)
        return c === undefined ? undefined : publicView(c)
      }),
    revoke,
    rotate,
    authenticate
  }
}

// ---------------------------------------------------------------------------------------------------------
// Backends

const memoryBackend = (): Backend => {
  let snapshot = emptySnapshot
  return {
    current: () => Effect.sync(() => snapshot),
    update: (f) =>
      Effect.map(
        Effect.suspend(() => f(snapshot)),
        ({ next, result }) => {
          snapshot = next
          return result
        }
      )
  }
}

interface ClientRecordV1 {
  readonly client_id: string
  readonly name: string
  readonly scopes: ReadonlyArray<Scope>
  readonly secret_hash: string
  readonly status: ClientStatus
  readonly created_at: string
  readonly rotated_at: string | null
}

interface RegistryFileV1 {
  readonly version: 1
  readonly pepper_id: string
  readonly clients: ReadonlyArray<ClientRecordV1>
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

/** Strict parse: a hand-edited file with a mistake is reported, not half-loaded. */
const parseRegistryFile = (file: string, text: string, pepper: Pepper): Effect.Effect<Snapshot, OAuthStorageError> => {
  const fail = (reason: string) => Effect.fail(new OAuthStorageError({ path: file, reason }))
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch {
    return fail("not valid JSON")
  }
  const root = data as Partial<RegistryFileV1> | null
  if (typeof root !== "object" || root === null || root.version !== 1 || !Array.isArray(root.clients)) {
    return fail(`expected {"version": 1, "pepper_id": ..., "clients": [...]}`)
  }
  if (root.pepper_id !== pepper.id) {
    return fail(
      "the registry was hashed with a different secret pepper (OAUTH_SECRET_PEPPER or DATA_DIR/oauth/pepper); " +
        "use the same pepper as when the clients were created"
    )
  }
  const clients = new Map<string, StoredClient>()
  for (const [i, r] of (root.clients as ReadonlyArray<Partial<ClientRecordV1> | null>).entries()) {
    const at = `clients[${i}]`
    if (typeof r !== "object" || r === null) return fail(`${at} is not an object`)
    if (typeof r.client_id !== "string" || r.client_id.length === 0) return fail(`${at}.client_id is missing`)
    if (clients.has(r.client_id)) return fail(`${at}.client_id is a duplicate`)
    if (typeof r.name !== "string") return fail(`${at}.name is missing`)
    if (!Array.isArray(r.scopes) || r.scopes.length === 0 || !r.scopes.every((s) => typeof s === "string" && isScope(s))) {
      return fail(`${at}.scopes must be a non-empty list of known scopes`)
    }
    const hash = typeof r.secret_hash === "string" ? decodeSecretHash(r.secret_hash) : undefined
    if (hash === undefined) return fail(`${at}.secret_hash is missing or malformed`)
    if (r.status !== "active" && r.status !== "revoked") return fail(`${at}.status must be active or revoked`)
    if (typeof r.created_at !== "string" || !ISO_DATE.test(r.created_at)) return fail(`${at}.created_at is not an ISO date`)
    if (r.rotated_at !== null && (typeof r.rotated_at !== "string" || !ISO_DATE.test(r.rotated_at))) {
      return fail(`${at}.rotated_at must be null or an ISO date`)
    }
    clients.set(r.client_id, {
      clientId: r.client_id,
      name: r.name,
      scopes: canonicalScopes(r.scopes),
      secretHash: hash,
      status: r.status,
      createdAt: r.created_at,
      rotatedAt: r.rotated_at ?? undefined
    })
  }
  return Effect.succeed({ clients })
}

const serializeRegistry = (snapshot: Snapshot, pepper: Pepper): string => {
  const body: RegistryFileV1 = {
    version: 1,
    pepper_id: pepper.id,
    clients: [...snapshot.clients.values()].map((c) => ({
      client_id: c.clientId,
      name: c.name,
      scopes: c.scopes,
      secret_hash: encodeSecretHash(c.secretHash),
      status: c.status,
      created_at: c.createdAt,
      rotated_at: c.rotatedAt ?? null
    }))
  }
  return JSON.stringify(body, null, 2) + "\n"
}

const fileBackend = (
  file: string,
  pepper: Pepper,
  reloadIntervalMs: number
): Effect.Effect<Backend, OAuthStorageError> =>
  Effect.gen(function*() {
    yield* ensureDir(path.dirname(file))
    const readFromDisk = Effect.gen(function*() {
      // Signature before content: if the file changes in between, the next check sees a new signature.
      const signature = yield* fileSignature(file)
      const text = signature === undefined ? undefined : yield* readTextIfExists(file)
      const snapshot = text === undefined ? emptySnapshot : yield* parseRegistryFile(file, text, pepper)
      return { signature, snapshot }
    })

    // A broken file at start-up fails the layer with a clear message; later it only logs.
    const initial = yield* readFromDisk
    let state = { ...initial, checkedAt: Date.now() }

    const refresh = Effect.gen(function*() {
      const signature = yield* fileSignature(file)
      if (signature === state.signature) return state.snapshot
      const next = yield* readFromDisk
      state = { ...next, checkedAt: state.checkedAt }
      yield* Effect.logInfo("oauth client registry reloaded").pipe(
        Effect.annotateLogs({ file, clients: next.snapshot.clients.size })
      )
      return next.snapshot
    }).pipe(
      Effect.catch((error) =>
        Effect.as(
          Effect.logWarning("oauth client registry not reloaded; keeping the last good state").pipe(
            Effect.annotateLogs({ file: error.path, reason: error.reason })
          ),
          state.snapshot
        )
      )
    )

    const current = (force: boolean): Effect.Effect<Snapshot> =>
      Effect.suspend(() => {
        // Wall-clock throttle (not the Effect Clock): it paces file-system checks, not token lifetimes.
        const now = Date.now()
        if (!force && now - state.checkedAt < reloadIntervalMs) return Effect.succeed(state.snapshot)
        state = { ...state, checkedAt: now }
        return refresh
      })

    const update: Backend["update"] = (f) =>
      withFileLock(
        file,
        Effect.gen(function*() {
          // Always from disk under the lock, never from the cache: another CLI run may have just written.
          const { snapshot } = yield* readFromDisk
          const { next, result } = yield* f(snapshot)
          if (next !== snapshot) yield* writeFileAtomic(file, serializeRegistry(next, pepper), 0o600)
          const signature = yield* fileSignature(file)
          state = { signature, snapshot: next, checkedAt: Date.now() }
          return result
        })
      )

    return { current, update }
  })

