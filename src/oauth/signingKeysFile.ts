/**
 * The signing key file, `$DATA_DIR/oauth/signing-keys.json` (mode 0600): the first entry is the signing
 * key (private, `retired_at` null); retired entries hold only public members and stay published.
 */
import { Effect, Schema } from "effect"
import { Base64Url, buildState, errorText, type KeyEntry, type KeyState, publicPart, SIGNING_ALG } from "./keyMaterial.ts"

/** As stored; `alg` and `use` may be left out by a hand edit (they are implied), `d` only on the first. */
const StoredJwk = Schema.Struct({
  kty: Schema.Literal("EC"),
  crv: Schema.Literal("P-256"),
  x: Base64Url,
  y: Base64Url,
  kid: Schema.String,
  alg: Schema.optionalKey(Schema.Literal(SIGNING_ALG)),
  use: Schema.optionalKey(Schema.Literal("sig")),
  d: Schema.optionalKey(Base64Url)
})

const DateText = Schema.String.check(
  Schema.makeFilter((s: string) => !Number.isNaN(Date.parse(s)), { expected: "an ISO date" })
)

const StoredKey = Schema.Struct({
  jwk: StoredJwk,
  created_at: Schema.optionalKey(Schema.String),
  retired_at: Schema.NullOr(DateText)
})

const firstActiveOnly = Schema.makeFilter((keys: ReadonlyArray<typeof StoredKey.Type>) =>
  keys.every((k, i) => (i === 0) === (k.retired_at === null))
    ? undefined
    : "exactly the first key must be active (retired_at null)"
)

/** Version 1. */
export const SigningKeysFile = Schema.Struct({
  version: Schema.Literal(1),
  keys: Schema.Array(StoredKey).check(Schema.isMinLength(1), firstActiveOnly)
})
export type SigningKeysFile = typeof SigningKeysFile.Type

/** The keys as a file holds them, and imported. */
export interface Keys {
  readonly entries: ReadonlyArray<KeyEntry>
  readonly state: KeyState
}

export const loadKeys = (content: SigningKeysFile): Effect.Effect<Keys, string> => {
  const entries = content.keys.map((k, i): KeyEntry => {
    const pub = publicPart(k.jwk)
    return {
      jwk: i === 0 && k.jwk.d !== undefined ? { ...pub, d: k.jwk.d } : pub,
      createdAt: k.created_at ?? "",
      retiredAt: k.retired_at ?? undefined
    }
  })
  return Effect.tryPromise({ try: () => buildState(entries), catch: errorText }).pipe(
    Effect.map((state) => ({ entries, state }))
  )
}

export const storeKeys = (keys: { readonly entries: ReadonlyArray<KeyEntry> }): SigningKeysFile => ({
  version: 1,
  keys: keys.entries.map((e) => ({ jwk: e.jwk, created_at: e.createdAt, retired_at: e.retiredAt ?? null }))
})
