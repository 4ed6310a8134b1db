/**
 * The live Newsletter chosen by NEWSLETTER_PROVIDER (CONTRACT C2, C5), configuration from the current
 * ConfigProvider. Needs an `HttpClient` (the "local" list ignores it and keeps its file open for the
 * layer's lifetime); Listmonk with an API user checks its lists before it is built. The in-memory fake for tests is `NewsletterMemory.layer` (memory.ts).
 */
import { Effect, Layer } from "effect"
import type { HttpClient } from "effect/http"
import type { ConfigInvalid } from "../config/ConfigInvalid.ts"
import type { StartupFailure } from "../lifecycle/StartupFailure.ts"
import { layerBrevo } from "./brevo.ts"
import { layerListmonk } from "./listmonk.ts"
import { layerLocal } from "./local.ts"
import type { Newsletter } from "./Newsletter.ts"
import { NewsletterConfig, type NewsletterConfigShape } from "./NewsletterConfig.ts"

const provider = (config: NewsletterConfigShape): Layer.Layer<Newsletter, ConfigInvalid | StartupFailure, HttpClient.HttpClient> => {
  switch (config.provider) {
    case "brevo":
      return layerBrevo(config.brevo, config.call)
    case "listmonk":
      return layerListmonk(config.listmonk, config.call)
    case "local":
      return layerLocal(config)
  }
}

export const layer: Layer.Layer<Newsletter, ConfigInvalid | StartupFailure, HttpClient.HttpClient> = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* NewsletterConfig
    yield* Effect.logInfo(`newsletter provider: ${config.provider}`)
    return provider(config)
  })
).pipe(Layer.provide(NewsletterConfig.layer))
