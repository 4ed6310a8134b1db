/**
 * The application's services, listed once: one named Layer each. `liveServices` builds them from the
 * configuration; a test takes its own record (test/support/app.ts) and replaces the ones it fakes, and
 * src/server.ts builds the app from whichever record it is given (`appServices`). A service the app
 * needs and the record lacks, or one that provides the wrong thing, is a compile error in server.ts.
 */
import { Effect, Layer } from "effect"
import type { Redis } from "effect/persistence"
import { AppConfig } from "./config/AppConfig.ts"
import type { BearerCheck } from "./http/BearerCheck.ts"
import { RequestCounter } from "./http/rateLimit.ts"
import type { Readiness } from "./lifecycle/Readiness.ts"
import type { Newsletter } from "./newsletter/Newsletter.ts"
import * as Newsletters from "./newsletter/layer.ts"
import { OAuth } from "./oauth/OAuth.ts"
import type { SigningKeys } from "./oauth/SigningKeys.ts"
import type { TokenEndpoint } from "./oauth/TokenEndpoint.ts"
import { AccessLog } from "./observability/AccessLog.ts"
import * as DurableCells from "./platform/durableCell/layer.ts"
import { sweepTempFiles } from "./platform/files.ts"
import * as UpstreamHttp from "./platform/upstreamHttp.ts"
import { DailyHistory } from "./rates/history/DailyHistory.ts"
import * as Rates from "./rates/layer.ts"
import type { RatesProvider } from "./rates/RatesProvider.ts"

/** What every service may use beneath it: the configuration, the providers' client, the readiness checks. */
type Beneath = AppConfig | UpstreamHttp.Upstream | Readiness

export interface AppServiceLayers {
  /** The configuration: the process environment (live), a test's variables. */
  readonly config: Layer.Layer<AppConfig, unknown>
  /** Historical exchange rates. */
  readonly rates: Layer.Layer<RatesProvider, unknown, Beneath>
  /** Newsletter sign-ups. */
  readonly newsletter: Layer.Layer<Newsletter, unknown, Beneath>
  /** The OAuth server: the token endpoint, the signing keys (JWKS) and the edge's bearer check. */
  readonly oauth: Layer.Layer<TokenEndpoint | SigningKeys | BearerCheck, unknown, Beneath>
  /** Where the edge counts requests against the rate limits. */
  readonly requestCounter: Layer.Layer<RequestCounter, unknown, Beneath>
  /** Where the edge writes its line per request. */
  readonly accessLog: Layer.Layer<AccessLog, unknown, Beneath>
  /** Work done once at start-up that provides nothing (live: the sweep of DATA_DIR). */
  readonly startUp: Layer.Layer<never, unknown, Beneath>
}

/** What the record provides, all services together. */
type ProvidedServices = { readonly [K in keyof AppServiceLayers]: Layer.Success<AppServiceLayers[K]> }[keyof AppServiceLayers]

/**
 * The record as one Layer: every service built side by side over the providers' client (UPSTREAM_USER_AGENT),
 * the configuration beneath them all and provided too. Layers are shared by identity within one build, so a
 * Layer two services provide (the Redis connection, the database pool, the rates' answer memo the edge
 * reads too) is built once.
 */
export const appServices = ({ config, ...services }: AppServiceLayers): Layer.Layer<ProvidedServices, unknown, Readiness> =>
  // Every field, whatever the record holds: a service added to AppServiceLayers is built without a change here.
  Layer.mergeAll(...(Object.values(services) as [Layer.Layer<ProvidedServices, unknown, Beneath>])).pipe(
    Layer.provide(UpstreamHttp.layer),
    Layer.provideMerge(config)
  )

/** The one Redis connection (REDIS_URL), whoever provides it; imported only when configured (~500 modules, 7-20 MB of RSS). */
const redisConnection = Layer.unwrap(
  Effect.flatMap(AppConfig, ({ redisUrl }) =>
    redisUrl === undefined
      ? Effect.die("the Redis connection is built only with REDIS_URL")
      : Effect.map(Effect.promise(() => import("./redis.ts")), ({ RedisLive }) => RedisLive(redisUrl)))
)

/**
 * Memory by default. With REDIS_URL, what all instances must share lives in Redis under REDIS_KEY_PREFIX:
 * rate-limit counts, the token endpoint's failure counts and used assertions, the rates copies, the
 * upstream budgets and circuit breakers.
 */
const sharedWithRedis = <A, E1, R1, E2, R2>(memory: Layer.Layer<A, E1, R1>, shared: (keyPrefix: string) => Layer.Layer<A, E2, R2>) => {
  type Either = Layer.Layer<A, E1 | E2 | Layer.Error<typeof redisConnection>, R1 | Exclude<R2, Redis.Redis> | Layer.Services<typeof redisConnection>>
  return Layer.unwrap(
    Effect.map(AppConfig, ({ redisKeyPrefix, redisUrl }): Either =>
      redisUrl === undefined ? memory : shared(redisKeyPrefix).pipe(Layer.provide(redisConnection)))
  )
}

/** A temp file older than this under DATA_DIR is no write in progress (they take milliseconds). */
const TEMP_FILE_AGE_MS = 60_000

/**
 * Once at start-up, the temp files that interrupted writes left anywhere under DATA_DIR (state/,
 * rates-history/, oauth/, ...) are removed; never a reason not to start.
 */
const SweptDataDir = Layer.effectDiscard(
  Effect.flatMap(AppConfig, ({ dataDir }) => sweepTempFiles(dataDir, TEMP_FILE_AGE_MS)).pipe(
    Effect.flatMap((removed) =>
      removed === 0 ? Effect.void : Effect.logInfo(`start-up: removed ${removed} temporary files left under DATA_DIR by interrupted writes`)),
    Effect.catchTag("FileError", (error) => Effect.logWarning("start-up: could not sweep DATA_DIR's temporary files", error.message))
  )
)

/**
 * Every live service, from configuration (the process environment). Durable either way: the rates history
 * and the month's credits, in PostgreSQL with DATABASE_URL (the OAuth tables' one pool), else the history in
 * files under DATA_DIR and the credits in Redis when configured, else in files under DATA_DIR/state (a
 * restart adds no credit).
 */
export const liveServices: AppServiceLayers = {
  config: AppConfig.layer,
  rates: sharedWithRedis(
    Rates.layer.pipe(Layer.provide(Layer.mergeAll(DailyHistory.layer, DurableCells.layerLocal))),
    (keyPrefix) => Rates.layerRedis(keyPrefix).pipe(Layer.provide(Layer.mergeAll(DailyHistory.layer, DurableCells.layerShared)))
  ),
  newsletter: Newsletters.layer,
  oauth: sharedWithRedis(OAuth.layer, () => OAuth.layerRedis),
  requestCounter: sharedWithRedis(RequestCounter.layerMemory, () => RequestCounter.layerRedis),
  accessLog: AccessLog.stdout,
  startUp: SweptDataDir
}
