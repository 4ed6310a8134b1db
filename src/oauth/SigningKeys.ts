/**
 * ES256 keys that sign access tokens (CONTRACT C6, RFC 9068), each with a `kid` = RFC 7638 thumbprint.
 *
 * Sources, in order:
 * - `OAUTH_SIGNING_KEYS` (origin `configured`): a JWKS of P-256 keys (a key without `kid` gets its RFC 7638
 *   thumbprint; a given `kid` is kept); the first is private and signs,
 *   the rest are published for verification. Rotation = edit the variable and restart
 *   (`node src/cli/clients.ts rotate-key` prints the next value).
 * - PostgreSQL with DATABASE_URL (store/keysTable.ts; origin `database`, or `generated` when this start
 *   created the first key): one set of keys for every instance, followed like the registry (NOTIFY, else
 *   a 500 ms poll), so a rotation made anywhere reaches every instance within a second.
 * - `$DATA_DIR/oauth/signing-keys.json` (signingKeysFile.ts; origin `file`, or `generated` when this start
 *   created it). `rotate()` adds a key that signs from then on and keeps the previous public keys published
 *   for 25 h (longer than the longest configurable token lifetime, 24 h, plus verifier caches), so tokens
 *   already issued stay valid until they expire. A running server sees a rotation made by the CLI within
 *   about a second (ReloadingFile), no restart needed.
 * - `layerTest` (origin `ephemeral`): in memory, for tests.
 */
import { Clock, Context, Effect, Layer, Redacted } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { ConfigInvalid } from "../config/ConfigInvalid.ts"
import type { FileError } from "../platform/files.ts"
import * as ReloadingFile from "../platform/ReloadingFile.ts"
import type { StartupFailure } from "../lifecycle/StartupFailure.ts"
import { OAuthDatabase } from "./store/Database.ts"
import { ensureSigningKey, keysState } from "./store/keysTable.ts"
import { makePgState } from "./store/pgState.ts"
import type { SharedState, StorageError } from "./store/SharedState.ts"
import { KeyRotationUnavailable } from "./errors.ts"
import {
  buildState,
  errorText,
  generateSigningJwk,
  type Jwks,
  type KeyEntry,
  type KeyState,
  type PrivateJwk,
  publicPart,
  type PublicJwk,
  type SigningKey,
  thumbprint
} from "./keyMaterial.ts"
import { OAuthConfig, type PrivateOrPublicEcJwk } from "./OAuthConfig.ts"
import { type Keys, loadKeys, SigningKeysFile, storeKeys } from "./signingKeysFile.ts"

type KeyOrigin = "configured" | "file" | "database" | "generated" | "ephemeral"

interface KeyRotation {
  readonly kid: string
  readonly publishedKids: ReadonlyArray<string>
  readonly removedKids: ReadonlyArray<string>
}

export interface SigningKeysShape {
  /**
   * Where the keys came from. `generated` (created by this start in DATA_DIR) and `ephemeral` are what a
   * production start-up check should refuse; `file` means DATA_DIR keys created earlier.
   */
  readonly origin: KeyOrigin
  readonly signingKey: () => Effect.Effect<SigningKey>
  /** Hot path: a map lookup of an already imported key; `undefined` for an unknown kid. */
  readonly verificationKey: (kid: string) => Effect.Effect<CryptoKey | undefined>
  /** `{keys: [...]}` with every published public key (signing key first). */
  readonly jwks: () => Effect.Effect<Jwks>
  /** New signing key; previous public keys stay published. Not available for configured keys. */
  readonly rotate: () => Effect.Effect<KeyRotation, KeyRotationUnavailable | StorageError>
}

/** Retired keys stay published this long: > TOKEN_TTL_SECONDS max (24 h) + remote JWKS caches. */
const RETIRED_KEY_RETENTION_MS = 25 * 3600 * 1000

export class SigningKeys extends Context.Service<SigningKeys, SigningKeysShape>()("app/oauth/SigningKeys") {
  /** OAUTH_SIGNING_KEYS when set; else PostgreSQL with DATABASE_URL; else the file under DATA_DIR. */
  static readonly layer: Layer.Layer<SigningKeys, StorageError | ConfigInvalid | StartupFailure, OAuthConfig | AppConfig> =
    Layer.unwrap(Effect.gen(function*(): Effect.fn.Return<
      Layer.Layer<SigningKeys, StorageError | ConfigInvalid | StartupFailure, AppConfig>,
      never,
      OAuthConfig | AppConfig
    > {
      const config = yield* OAuthConfig
      const { databaseUrl } = yield* AppConfig
      if (config.signingKeys !== undefined) {
        return Layer.effect(SigningKeys, configuredKeys(Redacted.value(config.signingKeys)))
      }
      if (databaseUrl !== undefined) return databaseKeys
      return Layer.effect(SigningKeys, fileKeys(config.signingKeysFile, config.reloadIntervalMs))
    }))

  /** One fresh key in memory (rotation works in memory too); for tests. */
  static readonly layerTest: Layer.Layer<SigningKeys> = Layer.effect(
    SigningKeys,
    Effect.gen(function*() {
      const entries = [yield* newEntry]
      const state = yield* Effect.promise(() => buildState(entries))
      return fromStore("ephemeral", ReloadingFile.inMemory<Keys>({ entries, state }))
    })
  )
}

const makeShape = (
  origin: KeyOrigin,
  current: Effect.Effect<KeyState>,
  rotate: SigningKeysShape["rotate"]
): SigningKeysShape => ({
  origin,
  signingKey: () => Effect.map(current, (s) => s.signing),
  verificationKey: (kid) => Effect.map(current, (s) => s.verify.get(kid)),
  jwks: () => Effect.map(current, (s) => s.jwks),
  rotate
})

const newEntry: Effect.Effect<KeyEntry> = Effect.gen(function*() {
  const createdAt = new Date(yield* Clock.currentTimeMillis).toISOString()
  return { jwk: yield* Effect.promise(generateSigningJwk), createdAt, retiredAt: undefined }
})

/** Puts a new signing key first; the old signing key keeps only its public part; expired retirees go. */
const rotateEntries = async (
  entries: ReadonlyArray<KeyEntry>,
  now: number
): Promise<{ readonly next: ReadonlyArray<KeyEntry>; readonly rotation: KeyRotation }> => {
  const fresh = await generateSigningJwk()
  const iso = new Date(now).toISOString()
  const kept: Array<KeyEntry> = []
  const removed: Array<string> = []
  for (const e of entries) {
    if (e.retiredAt === undefined) {
      kept.push({ jwk: publicPart(e.jwk), createdAt: e.createdAt, retiredAt: iso })
    } else if (now - Date.parse(e.retiredAt) > RETIRED_KEY_RETENTION_MS) {
      removed.push(e.jwk.kid)
    } else {
      kept.push(e)
    }
  }
  const next = [{ jwk: fresh, createdAt: iso, retiredAt: undefined }, ...kept]
  return { next, rotation: { kid: fresh.kid, publishedKids: next.map((e) => e.jwk.kid), removedKids: removed } }
}

/** File, database and memory keys alike: rotation is a read-modify-write of the entries. */
const fromStore = (origin: KeyOrigin, store: SharedState<Keys, StorageError>): SigningKeysShape =>
  makeShape(origin, Effect.map(store.get, (k) => k.state), () =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      // Keys this code just generated that fail to import are a bug: a defect, not a storage error.
      const rotation = yield* store.modify((current) =>
        Effect.promise(async () => {
          const { next, rotation } = await rotateEntries(current.entries, now)
          return { next: { entries: next, state: await buildState(next) }, result: rotation }
        })
      )
      yield* Effect.logInfo("oauth signing key rotated").pipe(Effect.annotateLogs({ kid: rotation.kid }))
      return rotation
    }))

const fileKeys = (file: string, reloadIntervalMs: number): Effect.Effect<SigningKeysShape, FileError> =>
  Effect.gen(function*() {
    // First start: the file is created under its lock, so a CLI starting at the same time agrees.
    const opened = yield* ReloadingFile.make({
      file,
      schema: SigningKeysFile,
      load: loadKeys,
      store: storeKeys,
      missing: { create: Effect.map(newEntry, (entry) => storeKeys({ entries: [entry] })) },
      reloadIntervalMs,
      label: "oauth signing keys",
      describe: ({ state }) => ({ kid: state.signing.kid, published: state.jwks.keys.length })
    })
    if (opened.created) {
      const { state } = yield* opened.get
      yield* Effect.logInfo("oauth signing key generated").pipe(Effect.annotateLogs({ file, kid: state.signing.kid }))
    }
    return fromStore(opened.created ? "generated" : "file", opened)
  })

const databaseKeys = Layer.effect(
  SigningKeys,
  Effect.gen(function*() {
    const db = yield* OAuthDatabase
    const created = yield* ensureSigningKey(db, newEntry)
    const store = yield* makePgState(db, keysState(db, created))
    if (created) {
      const { state } = yield* store.get
      yield* Effect.logInfo("oauth signing key generated").pipe(Effect.annotateLogs({ store: "postgresql", kid: state.signing.kid }))
    }
    return fromStore(created ? "generated" : "database", store)
  })
).pipe(Layer.provide(OAuthDatabase.layer))

const configuredKeys = (keys: ReadonlyArray<PrivateOrPublicEcJwk>): Effect.Effect<SigningKeysShape, ConfigInvalid> =>
  Effect.tryPromise({
    try: async () => {
      const entries: Array<KeyEntry> = []
      for (const k of keys) {
        const kid = k.kid ?? (await thumbprint(k))
        const jwk = k.d === undefined ? publicPart({ ...k, kid }) : { ...publicPart({ ...k, kid }), d: k.d }
        entries.push({ jwk, createdAt: "", retiredAt: undefined })
      }
      return await buildState(entries)
    },
    // Never echo key material: only say which variable and what kind of problem.
    catch: (e) => new ConfigInvalid({ problems: [`OAUTH_SIGNING_KEYS: cannot use the keys (${errorText(e)})`] })
  }).pipe(
    Effect.map((state) =>
      makeShape("configured", Effect.succeed(state), () =>
        Effect.fail(
          new KeyRotationUnavailable({
            reason: "signing keys come from OAUTH_SIGNING_KEYS: put a new key first in that JWKS and restart"
          })
        ))
    )
  )

/**
 * For `rotate-key` with configured keys: the next value of OAUTH_SIGNING_KEYS, a new private key first
 * and the previous keys after it with only their public members (they verify, no longer sign).
 */
export const nextConfiguredJwks = async (
  keys: ReadonlyArray<PrivateOrPublicEcJwk>
): Promise<{ readonly keys: ReadonlyArray<PublicJwk | PrivateJwk> }> => {
  const fresh = await generateSigningJwk()
  const previous: Array<PublicJwk> = []
  for (const k of keys) previous.push(publicPart({ x: k.x, y: k.y, kid: k.kid ?? (await thumbprint(k)) }))
  return { keys: [fresh, ...previous] }
}
