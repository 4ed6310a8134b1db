/**
 * Which DurableCell the configuration asks for: shared by every instance when Redis is configured
 * (REDIS_URL), else files under DATA_DIR/state (one instance; survives restarts).
 */
import * as path from "node:path"
import { Effect, Layer } from "effect"
import type { Redis } from "effect/persistence"
import { AppConfig } from "../../config/AppConfig.ts"
import type { DurableCell } from "./DurableCell.ts"
import { layerFile } from "./file.ts"
import { layerRedis } from "./redis.ts"

/** Files under DATA_DIR/state. */
export const layerDataDir: Layer.Layer<DurableCell, never, AppConfig> = Layer.unwrap(
  Effect.map(AppConfig, ({ dataDir }) => layerFile(path.join(dataDir, "state")))
)

/** In Redis, under REDIS_KEY_PREFIX. */
export const layerSharedRedis: Layer.Layer<DurableCell, never, AppConfig | Redis.Redis> = Layer.unwrap(
  Effect.map(AppConfig, ({ redisKeyPrefix }) => layerRedis(redisKeyPrefix))
)
