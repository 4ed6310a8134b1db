/**
 * Client secrets: generation (256 random bits), keyed hashing (HMAC-SHA-256 with a pepper) and
 * constant-time comparison.
 *
 * Why HMAC and not a slow KDF: generated secrets carry 256 bits of entropy, so offline guessing is
 * hopeless anyway; a pepper kept outside the registry file means a leaked registry alone reveals nothing;
 * and the token endpoint stays cheap (a KDF per request would be the DoS and benchmark bottleneck).
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { Effect, Redacted } from "effect"
import { FileError, readOrCreate } from "../platform/files.ts"

export const randomToken = (bytes: number): string => randomBytes(bytes).toString("base64url")

/** 256 random bits, base64url (43 characters). */
export const newClientSecret = (): string => randomToken(32)

/**
 * 128 random bits, base64url (22 characters): unguessable, URL-safe. Redrawn until it starts with a
 * letter or digit, so that it never looks like a command-line option (`revoke -abc…`).
 */
export const newClientId = (): string => {
  for (;;) {
    const id = randomToken(16)
    if (/^[A-Za-z0-9]/.test(id)) return id
  }
}

/** `database`: kept in PostgreSQL beside the registry (development, without OAUTH_SECRET_PEPPER). */
export type PepperOrigin = "configured" | "file" | "database" | "generated" | "memory"

/**
 * The pepper never leaves this closure: no field holds the key, so logging a `Pepper` shows nothing secret.
 */
export interface Pepper {
  readonly origin: PepperOrigin
  /** A short fingerprint stored in the registry file, to detect a registry hashed with another pepper. */
  readonly id: string
  /** HMAC-SHA-256(pepper, UTF-8 secret): 32 bytes. */
  readonly hash: (secret: string) => Buffer
}

export const makePepper = (value: string, origin: PepperOrigin): Pepper => {
  const key = Buffer.from(value, "utf8")
  const hmac = (data: string) => createHmac("sha256", key).update(data, "utf8").digest()
  return {
    origin,
    id: hmac("\u0000pepper-id:v1").subarray(0, 9).toString("base64url"),
    hash: hmac
  }
}

/** The configured pepper, else the one in `pepperFile` (created with mode 0600 on first use). */
export const loadPepper = (options: {
  readonly configured: Redacted.Redacted<string> | undefined
  readonly pepperFile: string
}): Effect.Effect<Pepper, FileError> => {
  if (options.configured !== undefined) {
    return Effect.succeed(makePepper(Redacted.value(options.configured), "configured"))
  }
  return Effect.flatMap(
    readOrCreate(options.pepperFile, 0o600, () => Effect.sync(() => randomToken(32) + "\n")),
    ({ created, text }) => {
      const value = text.trim()
      return value.length < 32
        ? Effect.fail(new FileError({ path: options.pepperFile, reason: "pepper shorter than 32 characters" }))
        : Effect.succeed(makePepper(value, created ? "generated" : "file"))
    }
  )
}

const HASH_PREFIX = "hmac-sha256:"

export const encodeSecretHash = (digest: Buffer): string => HASH_PREFIX + digest.toString("base64url")

/** The 32-byte digest, or `undefined` if `text` is not a hash this version wrote. */
export const decodeSecretHash = (text: string): Buffer | undefined => {
  if (!text.startsWith(HASH_PREFIX)) return undefined
  const body = text.slice(HASH_PREFIX.length)
  if (!/^[A-Za-z0-9_-]{43}$/.test(body)) return undefined
  const digest = Buffer.from(body, "base64url")
  return digest.length === 32 ? digest : undefined
}

/**
 * Constant-time equality of two 32-byte digests. Both sides are always digests of equal length, so
 * `timingSafeEqual` never throws and its time does not depend on where they differ.
 */
export const digestsEqual = (a: Buffer, b: Buffer): boolean => a.length === b.length && timingSafeEqual(a, b)
