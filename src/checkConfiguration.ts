/**
 * The start-up check (CONTRACT C2): every configuration group evaluated together, so one run reports
 * every bad variable, across groups, in a single `ConfigInvalid`. src/main.ts runs it before anything
 * else; each group's Layer reads the same Configs again when the server builds it. It sits beside
 * main.ts, above the capabilities whose groups it reads (src/config/ is below them).
 */
import { Config, Effect } from "effect"
import { readAppConfig } from "./config/AppConfig.ts"
import type { ConfigInvalid } from "./config/ConfigInvalid.ts"
import { int, problem, readAll } from "./config/read.ts"
import { readNewsletterConfig } from "./newsletter/NewsletterConfig.ts"
import { readOAuthConfig } from "./oauth/OAuthConfig.ts"
import { readCoinbaseConfig } from "./rates/coinbase/CoinbaseConfig.ts"
import { readCoinGeckoConfig } from "./rates/coingecko/CoinGeckoConfig.ts"

export interface ValidConfiguration {
  readonly app: Effect.Success<typeof readAppConfig>
  readonly rates: Effect.Success<typeof readCoinGeckoConfig>
  readonly coinbase: Effect.Success<typeof readCoinbaseConfig>
  readonly newsletter: Effect.Success<typeof readNewsletterConfig>
  readonly oauth: Effect.Success<typeof readOAuthConfig>
  readonly webConcurrency: number
}

/** Server processes (node:cluster workers sharing the port); more than one needs REDIS_URL. */
const webConcurrency = Effect.gen(function*() {
  const workers = yield* int("WEB_CONCURRENCY", 1, 1, 64)
  const redis = yield* Effect.option(Config.String("REDIS_URL"))
  if (workers > 1 && redis._tag === "None") {
    return yield* problem(
      "WEB_CONCURRENCY: more than one worker needs REDIS_URL, so that rate limits and the rates cache are shared"
    )
  }
  return workers
})

export const validateConfiguration: Effect.Effect<ValidConfiguration, ConfigInvalid> = readAll({
  app: readAppConfig,
  rates: readCoinGeckoConfig,
  coinbase: readCoinbaseConfig,
  newsletter: readNewsletterConfig,
  oauth: readOAuthConfig,
  webConcurrency
})

