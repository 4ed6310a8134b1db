/**
 * Layers that assemble the OAuth core. The HTTP layer provides `OAuthLive` (it needs `AppConfig`) and
 * uses `TokenEndpoint`, `BearerAuth`, `SigningKeys.jwks()` and `discoveryDocument(config)`.
 */
import { Layer } from "effect"
import { BearerAuth } from "./BearerAuth.ts"
import { ClientRegistry, type CreateClientInput } from "./ClientRegistry.ts"
import { FailureLimiter } from "./FailureLimiter.ts"
import { OAuthConfig } from "./OAuthConfig.ts"
import { SigningKeys } from "./SigningKeys.ts"
import { TokenEndpoint } from "./TokenEndpoint.ts"
import { TokenService } from "./TokenService.ts"

export type OAuthServices =
  | OAuthConfig
  | ClientRegistry
  | SigningKeys
  | FailureLimiter
  | TokenService
  | TokenEndpoint
  | BearerAuth

const assemble = <E, R>(base: Layer.Layer<ClientRegistry | SigningKeys | FailureLimiter, E, R>) =>
  Layer.mergeAll(TokenEndpoint.layer, BearerAuth.layer).pipe(
    Layer.provideMerge(TokenService.layer),
    Layer.provideMerge(base)
  )

const fileBacked = Layer.mergeAll(ClientRegistry.layer, SigningKeys.layer, FailureLimiter.layer)

/** Live: registry, pepper and keys under DATA_DIR (or from OAUTH_* variables of the current ConfigProvider). */
export const OAuthLive = assemble(fileBacked).pipe(Layer.provideMerge(OAuthConfig.layer))

/**
 * In memory, for HTTP tests: the given clients (fixed ids and secrets allowed), one ephemeral signing
 * key, a failure limiter with `maxFailuresPerMinute` (default 10). Needs `AppConfig`.
 */
export const oauthTestLayer = (options: {
  readonly clients?: ReadonlyArray<CreateClientInput>
  readonly maxFailuresPerMinute?: number
} = {}) =>
  assemble(
    Layer.mergeAll(
      ClientRegistry.layerMemory(options.clients ?? []),
      SigningKeys.layerEphemeral,
      FailureLimiter.layerMemory({ limit: options.maxFailuresPerMinute ?? 10, windowSeconds: 60 })
    )
  )
