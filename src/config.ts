/**
 * Process-wide configuration (CONTRACT C2). Each capability reads its own upstream settings in its
 * own folder with the same `EnvReader`; this holds what the HTTP edge and several capabilities share.
 */
import { Context, Effect, Layer, type Redacted } from "effect"
import { type ConfigInvalid, type Env, EnvReader } from "./env.ts"

export interface AppConfigShape {
  readonly port: number
  readonly host: string
  readonly appEnv: string
  readonly isProduction: boolean
  /** The OAuth issuer and base of problem `type` URIs; no trailing slash. */
  readonly publicBaseUrl: string
  readonly dataDir: string
  readonly corsOrigins: ReadonlyArray<string> | "*"
  readonly trustProxy: boolean
  readonly redisUrl: Redacted.Redacted<string> | undefined
  /** Prefix of every Redis key, so several deployments (or test runs) can share one Redis. */
  readonly redisKeyPrefix: string
  readonly tokenTtlSeconds: number
  /** Anonymous per-IP limits per minute (C8); a token's tier is ten times these. */
  readonly rateLimits: { readonly health: number; readonly rates: number; readonly subscribe: number }
  /** Port of the private /metrics listener; undefined = metrics not exposed. */
  readonly metricsPort: number | undefined
  readonly metricsHost: string
  /** OTLP/HTTP collector base URL (traces, metrics, logs); undefined = no export. */
  readonly otlpEndpoint: string | undefined
  readonly serviceName: string
  /** Largest accepted request body in bytes (C8: 16 KiB). */
  readonly maxBodyBytes: number
  /**
   * Health and repeated exchange-rates queries answered from node:http without a fiber (src/http/fastLane.ts).
   * FAST_LANE=false turns it off; it is off anyway with an OTLP endpoint (every request gets its span).
   */
  readonly fastLane: boolean
}

export const readAppConfig = (env: Env): Effect.Effect<AppConfigShape, ConfigInvalid> => {
  const r = new EnvReader(env)
  const port = r.int("PORT", 3000, 0, 65535)
  const appEnv = r.string("APP_ENV", "development")
  const origins = r.string("CORS_ORIGINS", "*")
  return r.done({
    port,
    host: r.string("HOST", "0.0.0.0"),
    appEnv,
    isProduction: appEnv === "production",
    publicBaseUrl: r.url("PUBLIC_BASE_URL", `http://localhost:${port}`),
    dataDir: r.string("DATA_DIR", "./data"),
    corsOrigins: origins === "*" ? "*" : origins.split(",").map((o) => o.trim()).filter((o) => o.length > 0),
    trustProxy: r.bool("TRUST_PROXY", false),
    redisUrl: r.secret("REDIS_URL"),
    redisKeyPrefix: r.string("REDIS_KEY_PREFIX", "crypto-api:"),
    tokenTtlSeconds: r.int("TOKEN_TTL_SECONDS", 900, 1, 86_400),
    rateLimits: {
      health: r.int("RATE_LIMIT_HEALTH_PER_MIN", 600),
      rates: r.int("RATE_LIMIT_RATES_PER_MIN", 60),
      subscribe: r.int("RATE_LIMIT_SUBSCRIBE_PER_MIN", 5)
    },
    metricsPort: r.raw("METRICS_PORT") === undefined ? undefined : r.int("METRICS_PORT", 9464, 1, 65535),
    metricsHost: r.string("METRICS_HOST", "127.0.0.1"),
    otlpEndpoint: r.raw("OTEL_EXPORTER_OTLP_ENDPOINT") === undefined ? undefined : r.url("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
    serviceName: r.string("OTEL_SERVICE_NAME", "crypto-landing-api"),
    maxBodyBytes: 16 * 1024,
    fastLane: r.bool("FAST_LANE", true) && r.raw("OTEL_EXPORTER_OTLP_ENDPOINT") === undefined
  })
}

export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("app/AppConfig") {
  static readonly layer = Layer.effect(AppConfig, Effect.suspend(() => readAppConfig(process.env)))
  /** For tests: configuration from an explicit environment, never the process's. */
  static readonly layerFrom = (env: Env) => Layer.effect(AppConfig, readAppConfig(env))
}
