/**
 * OAuth settings read from the current `ConfigProvider` (CONTRACT C2: every bad variable is named).
 * With APP_ENV=production, key material this very start would generate (lost with the container,
 * different on every instance) is refused: the pepper must be configured, and the signing keys too
 * unless DATABASE_URL keeps them in PostgreSQL (shared by every instance, durable).
 *
 * | variable | default | meaning |
 * |---|---|---|
 * | `OAUTH_CLIENTS_FILE` | `$DATA_DIR/oauth/clients.json` | client registry (hashes only, never secrets) |
 * | `OAUTH_SECRET_PEPPER` | generated into `$DATA_DIR/oauth/pepper` (mode 0600) | HMAC key for client-secret hashes, ≥ 32 characters |
 * | `OAUTH_SIGNING_KEYS` | generated into `$DATA_DIR/oauth/signing-keys.json` (mode 0600), or into PostgreSQL with `DATABASE_URL` | JWKS JSON of ES256 (P-256) keys; the first must be private and signs |
 * | `OAUTH_MAX_FAILURES_PER_MIN` | `10` | failed token requests per minute from one address for one client; ten times that per address |
 * | `OAUTH_JWKS_URI_ALLOWED_NETWORKS` | none in production, every one elsewhere | private, loopback or link-local networks (CIDRs) a client's `jwks_uri` may reach; `none`: no such address |
 */
import * as path from "node:path"
import { Config, Context, Effect, Layer, Redacted, Result } from "effect"
import { IpNetwork, NetAddress } from "effect/net"
import type { ConfigInvalid } from "../config/ConfigInvalid.ts"
import { dataDir, int, isProduction, optional, parsed, problem, readAll, secret, text } from "../config/read.ts"

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
  /** Canonical CIDRs of non-public networks a jwks_uri may reach; `all` outside production by default. */
  readonly jwksUriAllowedNetworks: ReadonlyArray<string> | "all"
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
const parseConfiguredJwks = (
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

const inProduction = (name: string, what: string) =>
  `${name}: required in production (APP_ENV=production): without it ${what} would be generated at start-up, ` +
  `lost with the container and different on every instance`

const pepper = secret("OAUTH_SECRET_PEPPER").pipe(
  Config.flatMap((p) =>
    Redacted.value(p).length >= 32
      ? Config.succeed(p)
      : problem("OAUTH_SECRET_PEPPER: must be at least 32 characters (use 32 random bytes, base64url); value not shown")
  )
)

const signingKeys = secret("OAUTH_SIGNING_KEYS").pipe(
  Config.flatMap((text) => {
    const parsed = parseConfiguredJwks("OAUTH_SIGNING_KEYS", Redacted.value(text))
    return "problem" in parsed
      ? problem(parsed.problem)
      : Config.succeed(Redacted.make(parsed.keys, { label: "OAUTH_SIGNING_KEYS" }))
  })
)

/** Absent in production → the problem naming the variable to set (this rule's one place). */
const requiredInProduction = <A>(name: string, what: string, self: Config.Config<A>) =>
  Effect.gen(function*() {
    const value = yield* optional(self)
    if (value === undefined && (yield* isProduction)) return yield* problem(inProduction(name, what))
    return value
  })

/** `none`, or a comma list of CIDRs (a bare address is its own /32 or /128). */
const parseNetworks = (raw: string): Result.Result<ReadonlyArray<string>, string | undefined> => {
  if (raw.toLowerCase() === "none") return Result.succeed([])
  const cidrs: Array<string> = []
  for (const entry of raw.split(",").map((e) => e.trim())) {
    const network = entry.includes("/")
      ? IpNetwork.fromString(entry)
      : Result.flatMap(NetAddress.ipFromString(entry), (ip) => IpNetwork.fromAddress(ip, NetAddress.isIpv4Address(ip) ? 32 : 128))
    if (Result.isFailure(network)) return Result.fail(`${JSON.stringify(entry)} is not a CIDR`)
    cidrs.push(IpNetwork.format(network.success))
  }
  return Result.succeed(cidrs)
}

/** Absent: none in production (a jwks_uri reaches public addresses only), every one elsewhere (local JWKS servers). */
const jwksUriAllowedNetworks = Effect.gen(function*() {
  const value = yield* optional(parsed("OAUTH_JWKS_URI_ALLOWED_NETWORKS", `"none" or a comma list of CIDRs such as 10.20.0.0/16`, parseNetworks))
  return value ?? ((yield* isProduction) ? [] : "all" as const)
})

export const readOAuthConfig: Effect.Effect<OAuthConfigShape, ConfigInvalid> = Effect.gen(function*() {
  const c = yield* readAll({
    dataDir,
    clientsFile: text("OAUTH_CLIENTS_FILE", ""),
    pepper: requiredInProduction("OAUTH_SECRET_PEPPER", "the client-secret pepper", pepper),
    signingKeys: Effect.flatMap(Config.option(Config.String("DATABASE_URL")), (database) =>
      database._tag === "Some" ? optional(signingKeys) : requiredInProduction("OAUTH_SIGNING_KEYS", "the token signing keys", signingKeys)),
    maxFailuresPerMinute: int("OAUTH_MAX_FAILURES_PER_MIN", 10, 1, 10_000),
    jwksUriAllowedNetworks
  })
  const oauthDir = path.join(c.dataDir, "oauth")
  return {
    clientsFile: path.resolve(c.clientsFile || path.join(oauthDir, "clients.json")),
    pepperFile: path.resolve(oauthDir, "pepper"),
    pepper: c.pepper,
    signingKeysFile: path.resolve(oauthDir, "signing-keys.json"),
    signingKeys: c.signingKeys,
    maxFailuresPerMinute: c.maxFailuresPerMinute,
    reloadIntervalMs: 1000,
    jwksUriAllowedNetworks: c.jwksUriAllowedNetworks
  }
})

export class OAuthConfig extends Context.Service<OAuthConfig, OAuthConfigShape>()("app/oauth/OAuthConfig") {
  /** From the current `ConfigProvider`: the process environment, or a test's (test/support/config.ts). */
  static readonly layer = Layer.effect(OAuthConfig, readOAuthConfig)
}
