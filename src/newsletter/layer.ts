/**
 * The live `Newsletter`, chosen by NEWSLETTER_PROVIDER (CONTRACT C2, C5). Configuration is checked
 * while the layer is built, so a bad or missing variable stops start-up with a message naming it.
 */
import { Effect, Layer } from "effect"
import { HttpClient } from "effect/http"
import type { ConfigInvalid } from "../config/ConfigInvalid.ts"
import { makeBrevo } from "./brevo.ts"
import { makeListmonk } from "./listmonk.ts"
import { makeLocal } from "./local.ts"
import { Newsletter } from "./Newsletter.ts"
import { NewsletterConfig } from "./NewsletterConfig.ts"

/**
 * Needs the configuration and an `HttpClient` (the entrypoint provides one, e.g.
 * `NodeHttpClient.layerUndici`; tests provide their own). The "local" provider ignores the client
 * and keeps its file open for the layer's lifetime.
 */
export const NewsletterLive: Layer.Layer<Newsletter, ConfigInvalid, NewsletterConfig | HttpClient.HttpClient> = Layer
  .effect(
    Newsletter,
    Effect.gen(function*() {
      const config = yield* NewsletterConfig
      const client = yield* HttpClient.HttpClient
      yield* Effect.logInfo(`newsletter provider: ${config.provider}`)
      switch (config.provider) {
        case "brevo":
          return makeBrevo(config.brevo, config.call, client)
        case "listmonk":
          return makeListmonk(config.listmonk, config.call, client)
        case "local":
          return yield* makeLocal(config)
      }
    })
  )

/** `NewsletterLive` with its configuration from the current `ConfigProvider`; needs only an `HttpClient`. */
export const NewsletterLayer: Layer.Layer<Newsletter, ConfigInvalid, HttpClient.HttpClient> = NewsletterLive.pipe(
  Layer.provide(NewsletterConfig.layer)
)
