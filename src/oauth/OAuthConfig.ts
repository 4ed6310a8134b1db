/**
 * OAuth settings read from the environment (CONTRACT C2 style: every bad variable is named).
 *
 * | variable | default | meaning |
 * |---|---|---|
 * | `OAUTH_CLIENTS_FILE` | `$DATA_DIR/oauth/clients.json` | client registry (hashes only, never secrets) |
 * | `OAUTH_SECRET_PEPPER` | generated into `$DATA_DIR/oauth/pepper` (mode 0600) | HMAC key for client-secret hashes, ≥ 32 characters |
 * | `OAUTH_SIGNING_KEYS` | generated into `$DATA_DIR/oauth/signing-keys.json` (mode 0600) | JWKS JSON of ES256 (P-256) keys; the first must be private and signs |
 * | `OAUTH_MAX_FAILURES_PER_MIN` | `10` | failed token requests allowed per IP and per client id per minute |
 */
import * as path from "node:path"
import { Context, Effect, Layer, Redacted } from "effect"
import { AppConfig } from "../config.ts"
import { type ConfigInvalid, type Env, EnvReader } from "../env.ts"

export interface OAuthConfigShape {
  readonly clientsFile: string
  readonly pepperFile: string
  readonly pepper: Redacted.Redacted<string> | undefined
  readonly signingKeysFile: string
  /** Already parsed and shape-checked; imported by `SigningKeys`. */
  readonly signingKeys: Redacted.Redacted<ReadonlyArray<PrivateOrPublicEcJwk>> | undefined
  readonly maxFailuresPerMinute: number
  /** How often (ms) the registry and key files are checked for changes made by the CLI. */
  readonly reloadIntervalMs: number
}

/** An EC P-256 JWK as accepted from configuration; `d` present means private. */
export interface PrivateOrPublicEcJwk {
  readonly kty: "EC"
  readonly crv: "P-256"
  readonly x: string
  readonly y: string
  readonly d?: string
  readonly kid?: string
}

const B64URL = /^[A-Za-z0-9_-]+$/

/** Shape check of a configured JWKS; never echoes key material in messages. */
export const parseConfiguredJwks = (
  name: string,
  text: string
): { readonly keys: ReadonlyArray<PrivateOrPublicEcJwk> } | { readonly problem: string } => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return { problem: `${name}: expected JSON ({"keys": [...]}), could not parse it` }
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys
  if (!Array.isArray(keys) || keys.length === 0) {
    return { problem: `${name}: expected a JWKS object with a non-empty "keys" array` }
  }
  const out: Array<PrivateOrPublicEcJwk> = []
  for (const [i, k] of keys.entries()) {
    const jwk = k as Record<string, unknown> | null
    const bad = (why: string) => ({ problem: `${name}: keys[${i}] ${why}` })
    if (typeof jwk !== "object" || jwk === null) return bad("is not an object")
    if (jwk.kty !== "EC" || jwk.crv !== "P-256") return bad(`must be an EC P-256 key (ES256)`)
    if (jwk.alg !== undefined && jwk.alg !== "ES256") return bad(`has alg other than ES256`)
    if (jwk.use !== undefined && jwk.use !== "sig") return bad(`has use other than sig`)
    for (const member of ["x", "y", "d"] as const) {
      const v = jwk[member]
      if (v === undefined && member === "d") continue
      if (typeof v !== "string" || !B64URL.test(v)) return bad(`has a missing or malformed "${member}"`)
    }
    if (jwk.kid !== undefined && (typeof jwk.kid !== "string" || jwk.kid.length === 0)) return bad(`has a bad "kid"`)
    if (i === 0 && jwk.d === undefined) return bad(`must be a private key (with "d"): the first key signs`)
    out.push({
      kty: "EC",
      crv: "P-256",
      x: jwk.x as string,
      y: jwk.y as string,
      ...(jwk.d === undefined ? {} : { d: jwk.d as string }),
      ...(jwk.kid === undefined ? {} : { kid: jwk.kid as string })
    })
  }
  const kids = out.flatMap((k) => (k.kid === undefined ? [] : [k.kid]))
  if (new Set(kids).size !== kids.length) return { problem: `${name}: two keys share a "kid"` }
  return { keys: out }
}

export const readOAuthConfig = (
  env: Env,
  dataDir: string
): Effect.Effect<OAuthConfigShape, ConfigInvalid> => {
  const r = new EnvReader(env)
  const oauthDir = path.join(dataDir, "oauth")
  const pepper = r.secret("OAUTH_SECRET_PEPPER")
  if (pepper !== undefined && Redacted.value(pepper).length < 32) {
    r.problems.push("OAUTH_SECRET_PEPPER: must be at least 32 characters (use 32 random bytes, base64url)")
  }
  const keysText = r.optional("OAUTH_SIGNING_KEYS")
  let signingKeys: OAuthConfigShape["signingKeys"]
  if (keysText !== undefined) {
    const parsed = parseConfiguredJwks("OAUTH_SIGNING_KEYS", keysText)
    if ("problem" in parsed) r.problems.push(parsed.problem)
    else signingKeys = Redacted.make(parsed.keys, { label: "OAUTH_SIGNING_KEYS" })
  }
  return r.done({
    clientsFile: path.resolve(r.string("OAUTH_CLIENTS_FILE", path.join(oauthDir, "clients.json"))),
    pepperFile: path.resolve(oauthDir, "pepper"),
    pepper,
    signingKeysFile: path.resolve(oauthDir, "signing-keys.json"),
    signingKeys,
    maxFailuresPerMinute: r.int("OAUTH_MAX_FAILURES_PER_MIN", 10, 1, 10_000),
    reloadIntervalMs: 1000
  })
}

export class OAuthConfig extends Context.Service<OAuthConfig, OAuthConfigShape>()("app/oauth/OAuthConfig") {
  /** From the process environment; `DATA_DIR` comes from `AppConfig`. */
  static readonly layer = Layer.effect(
    OAuthConfig,
    Effect.gen(function*() {
      const app = yield* AppConfig
      return yield* Effect.suspend(() => readOAuthConfig(process.env, app.dataDir))
    })
  )
  /** For tests: an explicit environment, never the process's. */
  static readonly layerFrom = (env: Env) =>
    Layer.effect(
      OAuthConfig,
      Effect.gen(function*() {
        const app = yield* AppConfig
        return yield* readOAuthConfig(env, app.dataDir)
      })
    )
}
