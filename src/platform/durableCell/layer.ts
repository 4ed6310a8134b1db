/**
 * Which DurableCell the configuration asks for: PostgreSQL with DATABASE_URL (durable, shared by every
 * instance); else Redis when configured (REDIS_URL: shared); else files under DATA_DIR/state (shared by
 * the processes on that directory, under a lock file; survives restarts).
 */
import * as path from "node:path"
import { Effect, Layer } from "effect"
import type { Redis } from "effect/persistence"
import { AppConfig } from "../../config/AppConfig.ts"
import type { StartupFailure } from "../../lifecycle/StartupFailure.ts"
import type { DurableCell } from "./DurableCell.ts"
import { layerFile } from "./file.ts"
import { layerPostgres } from "./postgres.ts"
import { layerRedis } from "./redis.ts"

/** Without Redis: PostgreSQL, else files under DATA_DIR/state. */
export const layerLocal: Layer.Layer<DurableCell, StartupFailure, AppConfig> = Layer.unwrap(
  Effect.map(AppConfig, ({ databaseUrl, dataDir }) => databaseUrl === undefined ? layerFile(path.join(dataDir, "state")) : layerPostgres)
)

/** With Redis: PostgreSQL, else Redis under REDIS_KEY_PREFIX. */
export const layerShared: Layer.Layer<DurableCell, StartupFailure, AppConfig | Redis.Redis> = Layer.unwrap(
  Effect.map(
    AppConfig,
    ({ databaseUrl, redisKeyPrefix }): Layer.Layer<DurableCell, StartupFailure, AppConfig | Redis.Redis> =>
      databaseUrl === undefined ? layerRedis(redisKeyPrefix) : layerPostgres
  )
)
