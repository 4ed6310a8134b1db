/**
 * The OAuth core assembled: `OAuth.layer` for the server (files under DATA_DIR, OAUTH_* variables; needs
 * `AppConfig` and the service's `HttpClient`, which fetches clients' jwks_uri), `OAuth.layerTest(...)` in
 * memory for tests. The HTTP side uses `TokenEndpoint`, `BearerAuth` (through the edge's `BearerCheck`,
 * which these Layers provide too), `SigningKeys.jwks()` and `discoveryDocument(config)`.
 */
import * as UpstreamHttp from "../platform/upstreamHttp.ts"
import { Layer } from "effect"
import type { HttpClient } from "effect/http"
import { ClientAssertion } from "./assertion/ClientAssertion.ts"
import { JtiStore } from "./assertion/JtiStore.ts"
import { BearerAuth } from "./BearerAuth.ts"
import { BearerCheckLive } from "./bearerMiddleware.ts"
import { ClientRegistry, type CreateClientInput, type CreateKeyClientInput } from "./ClientRegistry.ts"
import { FailureLimiter } from "./FailureLimiter.ts"
import { RemoteJwks } from "./jwksUri/RemoteJwks.ts"
import { OAuthConfig } from "./OAuthConfig.ts"
import { SigningKeys } from "./SigningKeys.ts"
import { TokenEndpoint } from "./TokenEndpoint.ts"
import { TokenService } from "./TokenService.ts"

type Base = ClientRegistry | SigningKeys | FailureLimiter | RemoteJwks | JtiStore

const assemble = <E, R>(base: Layer.Layer<Base, E, R>) =>
  Layer.mergeAll(TokenEndpoint.layer, BearerCheckLive).pipe(
    Layer.provideMerge(BearerAuth.layer),
    Layer.provideMerge(TokenService.layer),
    Layer.provideMerge(ClientAssertion.layer),
    Layer.provideMerge(base)
  )

const live = <E, R>(shared: Layer.Layer<FailureLimiter | JtiStore, E, R>) =>
  assemble(Layer.mergeAll(ClientRegistry.layer, SigningKeys.layer, RemoteJwks.layer, shared)).pipe(Layer.provideMerge(OAuthConfig.layer))

export const OAuth = {
  /** Registry, pepper and keys under DATA_DIR (or from OAUTH_* variables of the current ConfigProvider). */
  layer: live(Layer.merge(FailureLimiter.layer, JtiStore.layer)),
  /** The same, with the token endpoint's failure limits and used assertions shared through Redis (REDIS_URL). */
  layerRedis: live(Layer.merge(FailureLimiter.layerRedis, JtiStore.layerRedis)),

  /**
   * In memory: the given clients (fixed ids and secrets allowed; `keys` for private_key_jwt ones), one
   * ephemeral signing key, a failure limiter with `maxFailuresPerMinute` (default 10), used assertions
   * in memory unless `jtiStore` says otherwise, jwks_uri fetched with undici (or `http`) from any address
   * outside production (`jwks` narrows it, or names a resolver). Needs `AppConfig`; no OAuthConfig.
   */
  layerTest: <E = never, R = never>(options: {
    readonly clients?: ReadonlyArray<CreateClientInput | CreateKeyClientInput>
    readonly maxFailuresPerMinute?: number
    readonly jtiStore?: Layer.Layer<JtiStore, E, R>
    readonly jwks?: Parameters<typeof RemoteJwks.layerTest>[0]
    readonly http?: Layer.Layer<HttpClient.HttpClient>
  } = {}) =>
    assemble(
      Layer.mergeAll(
        ClientRegistry.layerTest(options.clients ?? []),
        SigningKeys.layerTest,
        FailureLimiter.layerTest({ limit: options.maxFailuresPerMinute ?? 10, windowSeconds: 60 }),
        RemoteJwks.layerTest(options.jwks).pipe(Layer.provide(options.http ?? UpstreamHttp.layerFor("crypto-landing-api/test"))),
        options.jtiStore ?? JtiStore.layer
      )
    )
} as const
