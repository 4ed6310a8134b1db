/**
 * Layers that assemble the OAuth core. The HTTP layer provides `OAuthLive` (it needs `AppConfig`) and
 * uses `TokenEndpoint`, `BearerAuth`, `SigningKeys.jwks()` and `discoveryDocument(config)`.
 */
import { Layer } from "effect"
import type { Env } from "../env.ts"
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

/** Live: registry, pepper and keys under DATA_DIR (or from OAUTH_* variables of the process environment). */
export const OAuthLive = assemble(fileBacked).pipe(Layer.provideMerge(OAuthConfig.layer))

/** Like `OAuthLive` but with OAUTH_* variables from an explicit environment (tests). */
export const oauthLayerFrom = (env: Env) => assemble(fileBacked).pipe(Layer.provideMerge(OAuthConfig.layerFrom(env)))

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

/**
 * What a production start-up should refuse (CONTRACT C2 "strict start-up checks"): key material or a
 * pepper that this very start generated, which would not survive a fresh container or be shared by
 * several instances.
 */
export const oauthProductionProblems = (state: {
  readonly keysOrigin: SigningKeys["Service"]["origin"]
  readonly pepperOrigin: ClientRegistry["Service"]["pepperOrigin"]
}): ReadonlyArray<string> => [
  ...(state.keysOrigin === "configured" || state.keysOrigin === "file"
    ? []
    : [`OAUTH_SIGNING_KEYS: required in production (signing keys were ${state.keysOrigin} at start-up)`]),
  ...(state.pepperOrigin === "configured" || state.pepperOrigin === "file"
    ? []
    : [`OAUTH_SECRET_PEPPER: required in production (the secret pepper was ${state.pepperOrigin} at start-up)`])
]
