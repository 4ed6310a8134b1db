/**
 * Process-wide configuration (CONTRACT C2): what the HTTP edge and several capabilities share. Each
 * capability reads its own upstream settings in its own folder with the helpers of ./read.ts.
 */
import { readFileSync } from "node:fs"
import { Config, Context, Effect, Layer, type Redacted, Result } from "effect"
import { IpNetwork, NetAddress } from "effect/net"
import type { ConfigInvalid } from "./ConfigInvalid.ts"
import { appEnv, type AppEnv, dataDir, expecting, httpUrl, int, optional, parsed, readAll, secretUrl, text } from "./read.ts"

/**
 * Which peers are trusted proxies (TRUST_PROXY): none, the last N hops, or peers inside these networks
 * (canonical `address/prefix` strings).
 */
export type TrustProxyRule =
  | { readonly _tag: "None" }
  | { readonly _tag: "Hops"; readonly hops: number }
  | { readonly _tag: "Cidrs"; readonly cidrs: ReadonlyArray<string> }

export interface AppConfigShape {
  readonly port: number
  readonly host: string
  readonly appEnv: AppEnv
  readonly isProduction: boolean
  /** The OAuth issuer and base of problem `type` URIs; no trailing slash. */
  readonly publicBaseUrl: string
  readonly dataDir: string
  /** Origins (`scheme://host[:port]`, as browsers send them) or every origin. */
  readonly corsOrigins: ReadonlyArray<string> | "*"
  readonly trustProxyRule: TrustProxyRule
  readonly redisUrl: Redacted.Redacted<string> | undefined
  /** Prefix of every Redis key, so several deployments (or test runs) can share one Redis. */
  readonly redisKeyPrefix: string
  /** PostgreSQL (OAuth registry and signing keys) when set. */
  readonly databaseUrl: Redacted.Redacted<string> | undefined
  readonly tokenTtlSeconds: number
  /** Anonymous per-IP limits per minute (C8); a token's tier is ten times these. */
  readonly rateLimits: { readonly rates: number; readonly subscribe: number }
  /** Port of the private /metrics listener; undefined = metrics not exposed. */
  readonly metricsPort: number | undefined
  readonly metricsHost: string
  /** OTLP/HTTP collector base URL (traces, metrics, logs); undefined = no export. */
  readonly otlpEndpoint: string | undefined
  readonly serviceName: string
  /** This build's version, as package.json states it. */
  readonly version: string
  /** The `User-Agent` of every call to a provider (C9): who we are and where to reach us. */
  readonly upstreamUserAgent: string
  /** Largest accepted request body in bytes (C8: 16 KiB). */
  readonly maxBodyBytes: number
  /** Open connections allowed per client address (IPv6 per /64; trusted proxies exempt); 0 = no cap. */
  readonly maxConnectionsPerAddress: number
  /** Open price streams per client address (IPv6 per /64) and per process (C10). */
  readonly liveStreams: { readonly perAddress: number; readonly max: number }
}

/** `false`, `true` (one hop), a hop count, or a comma list of CIDRs (a bare address is its own /32 or /128). */
export const parseTrustProxy = (raw: string): Result.Result<TrustProxyRule, string | undefined> => {
  const value = raw.toLowerCase()
  if (value === "false" || value === "0") return Result.succeed({ _tag: "None" })
  if (value === "true") return Result.succeed({ _tag: "Hops", hops: 1 })
  if (/^\d+$/.test(value)) {
    const hops = Number(value)
    return Number.isSafeInteger(hops) ? Result.succeed({ _tag: "Hops", hops }) : Result.fail("too many hops")
  }
  const cidrs: Array<string> = []
  for (const entry of value.split(",").map((e) => e.trim())) {
    const network = entry.includes("/")
      ? IpNetwork.fromString(entry)
      : Result.flatMap(
        NetAddress.ipFromString(entry),
        (ip) => IpNetwork.fromAddress(ip, NetAddress.isIpv4Address(ip) ? 32 : 128)
      )
    if (Result.isFailure(network)) {
      // Effect's reason only when it tells more than "not a CIDR" (e.g. host bits set in 10.0.0.1/8).
      return Result.fail(`${JSON.stringify(entry)} is not a CIDR` + (/host bits/.test(network.failure.message) ? `: ${network.failure.message}` : ""))
    }
    cidrs.push(IpNetwork.format(network.success))
  }
  return Result.succeed({ _tag: "Cidrs", cidrs })
}

/** `*` alone, or a comma list of origins `scheme://host[:port]` (no path, query or credentials). */
const parseCorsOrigins = (raw: string): Result.Result<ReadonlyArray<string> | "*", string | undefined> => {
  if (raw === "*") return Result.succeed("*")
  const origins: Array<string> = []
  for (const entry of raw.split(",").map((e) => e.trim()).filter((e) => e !== "")) {
    if (!/^https?:\/\/[^/?#@\s]+$/i.test(entry) || !URL.canParse(entry)) {
      return Result.fail(entry === "*" ? `"*" must stand alone` : `bad entry ${JSON.stringify(entry)}`)
    }
    origins.push(new URL(entry).origin)
  }
  return origins.length > 0 ? Result.succeed(origins) : Result.fail(undefined)
}

const trustProxyRule = parsed(
  "TRUST_PROXY",
  "true or false, a hop count of 1 or more, or a comma list of CIDRs",
  parseTrustProxy
).pipe(Config.withDefault<TrustProxyRule>({ _tag: "None" }))

const corsOrigins = parsed(
  "CORS_ORIGINS",
  `"*" or a comma list of origins such as https://app.example or http://localhost:5173 (no path)`,
  parseCorsOrigins
).pipe(Config.withDefault("*" as const))

/** What package.json says this build is: read once per configuration read, never on import. */
const packageVersion = (): string =>
  (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version

// A header value a proxy will pass: visible ASCII and spaces, no line breaks (RFC 9110 field-value).
const headerText = /^[\x21-\x7e](?:[\x20-\x7e]{0,254}[\x21-\x7e])?$/

const upstreamUserAgent = parsed(
  "UPSTREAM_USER_AGENT",
  "a descriptive User-Agent of 1 to 256 visible ASCII characters, such as \"acme-rates/2.1 (+https://acme.example)\"",
  (raw) => headerText.test(raw) ? Result.succeed(raw) : Result.fail(undefined)
)

export const readAppConfig: Effect.Effect<AppConfigShape, ConfigInvalid> = Effect.gen(function*() {
  const c = yield* readAll({
    port: int("PORT", 3000, 0, 65535),
    host: text("HOST", "0.0.0.0"),
    appEnv,
    publicBaseUrl: optional(httpUrl("PUBLIC_BASE_URL")),
    dataDir,
    corsOrigins,
    trustProxyRule,
    redisUrl: optional(secretUrl("REDIS_URL", ["redis:", "rediss:"])),
    redisKeyPrefix: text("REDIS_KEY_PREFIX", "crypto-api:"),
    databaseUrl: optional(secretUrl("DATABASE_URL", ["postgres:", "postgresql:"])),
    tokenTtlSeconds: int("TOKEN_TTL_SECONDS", 900, 1, 86_400),
    rates: int("RATE_LIMIT_RATES_PER_MIN", 60),
    subscribe: int("RATE_LIMIT_SUBSCRIBE_PER_MIN", 5),
    metricsPort: optional(Config.Port("METRICS_PORT").pipe(expecting("METRICS_PORT", "a port from 1 to 65535"))),
    metricsHost: text("METRICS_HOST", "127.0.0.1"),
    otlpEndpoint: optional(httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT")),
    serviceName: text("OTEL_SERVICE_NAME", "crypto-landing-api"),
    maxConnectionsPerAddress: int("MAX_CONNECTIONS_PER_ADDRESS", 256, 0),
    liveStreamsPerAddress: int("LIVE_STREAMS_PER_ADDRESS", 100, 1),
    liveStreamsMax: int("LIVE_STREAMS_MAX", 10_000, 1),
    upstreamUserAgent: optional(upstreamUserAgent)
  })
  const publicBaseUrl = c.publicBaseUrl ?? `http://localhost:${c.port}`
  const version = packageVersion()
  return {
    port: c.port,
    host: c.host,
    appEnv: c.appEnv,
    isProduction: c.appEnv === "production",
    publicBaseUrl,
    dataDir: c.dataDir,
    corsOrigins: c.corsOrigins,
    trustProxyRule: c.trustProxyRule,
    redisUrl: c.redisUrl,
    redisKeyPrefix: c.redisKeyPrefix,
    databaseUrl: c.databaseUrl,
    tokenTtlSeconds: c.tokenTtlSeconds,
    rateLimits: { rates: c.rates, subscribe: c.subscribe },
    metricsPort: c.metricsPort,
    metricsHost: c.metricsHost,
    otlpEndpoint: c.otlpEndpoint,
    serviceName: c.serviceName,
    version,
    upstreamUserAgent: c.upstreamUserAgent ?? `crypto-landing-api/${version} (+${publicBaseUrl})`,
    maxBodyBytes: 16 * 1024,
    maxConnectionsPerAddress: c.maxConnectionsPerAddress,
    liveStreams: { perAddress: c.liveStreamsPerAddress, max: c.liveStreamsMax }
  }
})

export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("app/AppConfig") {
  /** From the current `ConfigProvider`: the process environment, or a test's (test/support/config.ts). */
  static readonly layer = Layer.effect(AppConfig, readAppConfig)
}
