/**
 * ES256 keys that sign access tokens (CONTRACT C6, RFC 9068), each with a `kid` = RFC 7638 thumbprint.
 *
 * Sources, in order:
 * - `OAUTH_SIGNING_KEYS` (origin `configured`): a JWKS of P-256 keys (a key without `kid` gets its RFC 7638
 *   thumbprint; a given `kid` is kept); the first is private and signs,
 *   the rest are published for verification. Rotation = edit the variable and restart
 *   (`node src/cli/clients.ts rotate-key` prints the next value).
 * - `$DATA_DIR/oauth/signing-keys.json` (origin `file`, or `generated` when this start created it; mode
 *   0600). `rotate()` adds a key that signs from then on and keeps the previous public keys published for
 *   25 h (longer than the longest configurable token lifetime, 24 h, plus verifier caches), so tokens
 *   already issued stay valid until they expire. A running server sees a rotation made by the CLI within
 *   about a second (the file is re-checked by inode/mtime/size), no restart needed.
 * - `layerEphemeral` (origin `ephemeral`): in memory, for tests.
 *
 * File format: `{"version":1,"keys":[{"jwk":{…,"kid","alg":"ES256","use":"sig"},"created_at":ISO,"retired_at":ISO|null}]}`;
 * the first entry is the signing key (private); retired entries hold only public members.
 */
import { Clock, Context, Effect, Layer, Redacted } from "effect"
import * as jose from "jose"
import { ConfigInvalid } from "../config/ConfigInvalid.ts"
import { KeyRotationUnavailable, OAuthStorageError } from "./errors.ts"
import { fileSignature, readOrCreate, readTextIfExists, withFileLock, writeFileAtomic } from "./files.ts"
import { OAuthConfig, type PrivateOrPublicEcJwk } from "./OAuthConfig.ts"

export const SIGNING_ALG = "ES256"

export type KeyOrigin = "configured" | "file" | "generated" | "ephemeral"

/** A published key, exactly as served at /.well-known/jwks.json. */
export interface PublicJwk {
  readonly kty: "EC"
  readonly crv: "P-256"
  readonly x: string
  readonly y: string
  readonly kid: string
  readonly alg: "ES256"
  readonly use: "sig"
}

export interface PrivateJwk extends PublicJwk {
  readonly d: string
}

export interface Jwks {
  readonly keys: ReadonlyArray<PublicJwk>
}

export interface SigningKey {
  readonly kid: string
  readonly privateKey: CryptoKey
}

export interface KeyRotation {
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
  readonly rotate: () => Effect.Effect<KeyRotation, KeyRotationUnavailable | OAuthStorageError>
}

/** Retired keys stay published this long: > TOKEN_TTL_SECONDS max (24 h) + remote JWKS caches. */
export const RETIRED_KEY_RETENTION_MS = 25 * 3600 * 1000

export class SigningKeys extends Context.Service<SigningKeys, SigningKeysShape>()("app/oauth/SigningKeys") {
  static readonly layer: Layer.Layer<SigningKeys, OAuthStorageError | ConfigInvalid, OAuthConfig> = Layer.effect(
    SigningKeys,
    Effect.gen(function*() {
      const config = yield* OAuthConfig
      if (config.signingKeys !== undefined) return yield* configuredKeys(Redacted.value(config.signingKeys))
      return yield* fileKeys(config.signingKeysFile, config.reloadIntervalMs)
    })
  )

  /** One fresh key in memory (rotation works in memory too); for tests. */
  static readonly layerEphemeral: Layer.Layer<SigningKeys> = Layer.effect(
    SigningKeys,
    Effect.suspend(() => ephemeralKeys())
  )
}

// ---------------------------------------------------------------------------------------------------------
// Key material

const publicPart = (jwk: { readonly x: string; readonly y: string; readonly kid: string }): PublicJwk => ({
  kty: "EC",
  crv: "P-256",
  x: jwk.x,
  y: jwk.y,
  kid: jwk.kid,
  alg: SIGNING_ALG,
  use: "sig"
})

/** RFC 7638 thumbprint (SHA-256, base64url) of the public members. */
export const thumbprint = (jwk: { readonly x: string; readonly y: string }): Promise<string> =>
  jose.calculateJwkThumbprint({ kty: "EC", crv: "P-256", x: jwk.x, y: jwk.y }, "sha256")

/** A new ES256 private JWK with `kid`, `alg`, `use`; also what `clients.ts generate-key` prints. */
export const generateSigningJwk = async (): Promise<PrivateJwk> => {
  const { privateKey } = await jose.generateKeyPair(SIGNING_ALG, { extractable: true })
  const jwk = await jose.exportJWK(privateKey)
  if (jwk.x === undefined || jwk.y === undefined || jwk.d === undefined) throw new Error("exportJWK gave no EC members")
  const kid = await thumbprint({ x: jwk.x, y: jwk.y })
  return { ...publicPart({ x: jwk.x, y: jwk.y, kid }), d: jwk.d }
}

interface KeyEntry {
  readonly jwk: PublicJwk | PrivateJwk
  readonly createdAt: string
  readonly retiredAt: string | undefined
}

/** Imported, ready-to-use state: built once per load, so the hot path does no key parsing. */
interface KeyState {
  readonly signing: SigningKey
  readonly verify: ReadonlyMap<string, CryptoKey>
  readonly jwks: Jwks
}

const isPrivate = (jwk: PublicJwk | PrivateJwk): jwk is PrivateJwk => "d" in jwk && typeof jwk.d === "string"

/**
 * Imports the keys; the first must be private. A sign-then-verify self test catches a private key whose
 * public half does not match before any token is issued with it.
 */
const buildState = async (entries: ReadonlyArray<KeyEntry>): Promise<KeyState> => {
  const [first] = entries
  if (first === undefined || !isPrivate(first.jwk)) throw new Error("the first key must be a private key")
  const privateKey = (await jose.importJWK(
    { kty: "EC", crv: "P-256", x: first.jwk.x, y: first.jwk.y, d: first.jwk.d },
    SIGNING_ALG
  )) as CryptoKey
  const verify = new Map<string, CryptoKey>()
  for (const e of entries) {
    if (verify.has(e.jwk.kid)) throw new Error(`two keys share the kid ${e.jwk.kid}`)
    verify.set(e.jwk.kid, (await jose.importJWK({ kty: "EC", crv: "P-256", x: e.jwk.x, y: e.jwk.y }, SIGNING_ALG)) as CryptoKey)
  }
  const probe = await new jose.CompactSign(new TextEncoder().encode("self-test")).setProtectedHeader({ alg: SIGNING_ALG })
    .sign(privateKey)
  await jose.compactVerify(probe, verify.get(first.jwk.kid)!).catch(() => {
    throw new Error("the signing key's private part does not match its public part")
  })
  return {
    signing: { kid: first.jwk.kid, privateKey },
    verify,
    jwks: { keys: entries.map((e) => publicPart(e.jwk)) }
  }
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e))

const makeShape = (
  origin: KeyOrigin,
  current: () => Effect.Effect<KeyState>,
  rotate: SigningKeysShape["rotate"]
): SigningKeysShape => ({
  origin,
  signingKey: () => Effect.map(current(), (s) => s.signing),
  verificationKey: (kid) => Effect.map(current(), (s) => s.verify.get(kid)),
  jwks: () => Effect.map(current(), (s) => s.jwks),
  rotate
})

// ---------------------------------------------------------------------------------------------------------
// Configured keys

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
      makeShape("configured", () => Effect.succeed(state), () =>
        Effect.fail(
          new KeyRotationUnavailable({
            reason: "signing keys come from OAUTH_SIGNING_KEYS: put a new key first in that JWKS and restart"
          })
        ))
    )
  )

// ---------------------------------------------------------------------------------------------------------
// In-memory keys (tests)

const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

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

const ephemeralKeys = (): Effect.Effect<SigningKeysShape> =>
  Effect.gen(function*() {
    const createdAt = yield* nowIso
    let entries: ReadonlyArray<KeyEntry> = [
      { jwk: yield* Effect.promise(generateSigningJwk), createdAt, retiredAt: undefined }
    ]
    let state = yield* Effect.promise(() => buildState(entries))
    return makeShape("ephemeral", () => Effect.sync(() => state), () =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const { next, rotation } = yield* Effect.promise(() => rotateEntries(entries, now))
        state = yield* Effect.promise(() => buildState(next))
        entries = next
        return rotation
      }))
  })

// ---------------------------------------------------------------------------------------------------------
// File keys

interface KeyFileV1 {
  readonly version: 1
  readonly keys: ReadonlyArray<{
    readonly jwk: PublicJwk | PrivateJwk
    readonly created_at: string
    readonly retired_at: string | null
  }>
}

const B64URL = /^[A-Za-z0-9_-]+$/

const parseKeyFile = (text: string): ReadonlyArray<KeyEntry> => {
  const root = JSON.parse(text) as Partial<KeyFileV1> | null
  if (typeof root !== "object" || root === null || root.version !== 1 || !Array.isArray(root.keys) || root.keys.length === 0) {
    throw new Error(`expected {"version": 1, "keys": [...]} with at least one key`)
  }
  return root.keys.map((k, i) => {
    const jwk = k?.jwk as Partial<PrivateJwk> | undefined
    const valid = jwk !== undefined && jwk.kty === "EC" && jwk.crv === "P-256" && typeof jwk.kid === "string" &&
      typeof jwk.x === "string" && B64URL.test(jwk.x) && typeof jwk.y === "string" && B64URL.test(jwk.y) &&
      (jwk.d === undefined || (typeof jwk.d === "string" && B64URL.test(jwk.d)))
    if (!valid) throw new Error(`keys[${i}].jwk is not an EC P-256 JWK with a kid`)
    const retired = k.retired_at
    if (retired !== null && (typeof retired !== "string" || Number.isNaN(Date.parse(retired)))) {
      throw new Error(`keys[${i}].retired_at must be null or an ISO date`)
    }
    if ((i === 0) !== (retired === null)) throw new Error("exactly the first key must be active (retired_at null)")
    const pub = publicPart({ x: jwk.x!, y: jwk.y!, kid: jwk.kid! })
    return {
      jwk: i === 0 && jwk.d !== undefined ? { ...pub, d: jwk.d } : pub,
      createdAt: typeof k.created_at === "string" ? k.created_at : "",
      retiredAt: retired ?? undefined
    }
  })
}

const serializeKeyFile = (entries: ReadonlyArray<KeyEntry>): string => {
  const body: KeyFileV1 = {
    version: 1,
    keys: entries.map((e) => ({ jwk: e.jwk, created_at: e.createdAt, retired_at: e.retiredAt ?? null }))
  }
  return JSON.stringify(body, null, 2) + "\n"
}

const fileKeys = (file: string, reloadIntervalMs: number): Effect.Effect<SigningKeysShape, OAuthStorageError> =>
  Effect.gen(function*() {
    const storageError = (e: unknown) => new OAuthStorageError({ path: file, reason: errorText(e) })
    const load = (text: string) =>
      Effect.tryPromise({
        try: async () => {
          const entries = parseKeyFile(text)
          return { entries, state: await buildState(entries) }
        },
        catch: storageError
      })

    // First start: create the key file (under its lock, so a CLI starting at the same time agrees).
    const { created, text } = yield* readOrCreate(file, 0o600, () =>
      Effect.gen(function*() {
        const createdAt = yield* nowIso
        const jwk = yield* Effect.promise(generateSigningJwk)
        return serializeKeyFile([{ jwk, createdAt, retiredAt: undefined }])
      }))
    const initial = yield* load(text)
    let cache = { state: initial.state, signature: yield* fileSignature(file), checkedAt: Date.now() }
    if (created) yield* Effect.logInfo("oauth signing key generated").pipe(Effect.annotateLogs({ file, kid: initial.state.signing.kid }))

    const refresh = Effect.gen(function*() {
      const signature = yield* fileSignature(file)
      if (signature === cache.signature) return cache.state
      const next = yield* readTextIfExists(file)
      if (next === undefined) return yield* Effect.fail(storageError("the key file disappeared"))
      const { state } = yield* load(next)
      cache = { state, signature, checkedAt: cache.checkedAt }
      yield* Effect.logInfo("oauth signing keys reloaded").pipe(
        Effect.annotateLogs({ file, kid: state.signing.kid, published: state.jwks.keys.length })
      )
      return state
    }).pipe(
      Effect.catch((error) =>
        Effect.as(
          Effect.logWarning("oauth signing keys not reloaded; keeping the last good keys").pipe(
            Effect.annotateLogs({ file, reason: error.reason })
          ),
          cache.state
        )
      )
    )

    const current = () =>
      Effect.suspend(() => {
        const now = Date.now()
        if (now - cache.checkedAt < reloadIntervalMs) return Effect.succeed(cache.state)
        cache = { ...cache, checkedAt: now }
        return refresh
      })

    const rotate = () =>
      withFileLock(
        file,
        Effect.gen(function*() {
          const text = yield* readTextIfExists(file)
          if (text === undefined) return yield* Effect.fail(storageError("the key file disappeared"))
          const { entries } = yield* load(text)
          const now = yield* Clock.currentTimeMillis
          const { next, rotation } = yield* Effect.tryPromise({ try: () => rotateEntries(entries, now), catch: storageError })
          const state = yield* Effect.tryPromise({ try: () => buildState(next), catch: storageError })
          yield* writeFileAtomic(file, serializeKeyFile(next), 0o600)
          cache = { state, signature: yield* fileSignature(file), checkedAt: Date.now() }
          yield* Effect.logInfo("oauth signing key rotated").pipe(Effect.annotateLogs({ file, kid: rotation.kid }))
          return rotation
        })
      )

    return makeShape(created ? "generated" : "file", current, rotate)
  })

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
