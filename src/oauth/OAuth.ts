/**
 * The OAuth core assembled: `OAuth.layer` for the server (files under DATA_DIR, OAUTH_* variables; needs
 * `AppConfig`), `OAuth.layerTest(...)` in memory for tests. The HTTP side uses `TokenEndpoint`,
 * `BearerAuth` (through the edge's `BearerCheck`, which these Layers provide too), `SigningKeys.jwks()`
 * and `discoveryDocument(config)`.
 */
import { Layer } from "effect"
import { BearerAuth } from "./BearerAuth.ts"
import { BearerCheckLive } from "./bearerMiddleware.ts"
import { ClientRegistry, type CreateClientInput } from "./ClientRegistry.ts"
import { FailureLimiter } from "./FailureLimiter.ts"
import { OAuthConfig } from "./OAuthConfig.ts"
import { SigningKeys } from "./SigningKeys.ts"
import { TokenEndpoint } from "./TokenEndpoint.ts"
import { TokenService } from "./TokenService.ts"

const assemble = <E, R>(base: Layer.Layer<ClientRegistry | SigningKeys | FailureLimiter, E, R>) =>
  Layer.mergeAll(TokenEndpoint.layer, BearerCheckLive).pipe(
    Layer.provideMerge(BearerAuth.layer),
    Layer.provideMerge(TokenService.layer),
    Layer.provideMerge(base)
  )

const live = <E, R>(failures: Layer.Layer<FailureLimiter, E, R>) =>
  assemble(Layer.mergeAll(ClientRegistry.layer, SigningKeys.layer, failures)).pipe(Layer.provideMerge(OAuthConfig.layer))

export const OAuth = {
  /** Registry, pepper and keys under DATA_DIR (or from OAUTH_* variables of the current ConfigProvider). */
  layer: live(FailureLimiter.layer),
  /** The same, with the token endpoint's failure limits shared through Redis (REDIS_URL). */
  layerRedis: live(FailureLimiter.layerRedis),

  /**
   * In memory: the given clients (fixed ids and secrets allowed), one ephemeral signing key, a failure
   * limiter with `maxFailuresPerMinute` (default 10). Needs `AppConfig`; no OAuthConfig.
   */
  layerTest: (options: {
    readonly clients?: ReadonlyArray<CreateClientInput>
    readonly maxFailuresPerMinute?: number
  } = {}) =>
    assemble(
      Layer.mergeAll(
        ClientRegistry.layerTest(options.clients ?? []),
        SigningKeys.layerTest,
        FailureLimiter.layerTest({ limit: options.maxFailuresPerMinute ?? 10, windowSeconds: 60 })
      )
    )
} as const
