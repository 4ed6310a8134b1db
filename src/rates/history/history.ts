/**
 * Where the rates history lives (CONTRACT C2, C4 "Over a month"): PostgreSQL when DATABASE_URL is
 * set (every instance shares it), else files under DATA_DIR.
 */
import { Effect, Layer } from "effect"
import { AppConfig } from "../../config/AppConfig.ts"
import type { StartupFailure } from "../../startup.ts"
import type { DailyHistory } from "./DailyHistory.ts"
import { layerFiles } from "./fileHistory.ts"
import { layerPostgres } from "./postgresHistory.ts"

export const layer: Layer.Layer<DailyHistory, StartupFailure, AppConfig> = Layer.unwrap(
  Effect.map(AppConfig, ({ dataDir, databaseUrl }) => (databaseUrl === undefined ? layerFiles(dataDir) : layerPostgres))
)
