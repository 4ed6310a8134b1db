/**
 * RFC 8414 authorization server metadata, served at GET /.well-known/oauth-authorization-server.
 * `issuer` is PUBLIC_BASE_URL byte for byte: clients compare it with the URL they built the request
 * from, and oauth4webapi compares the JWT `iss` with it as a plain string.
 */
import { Scopes } from "./scopes.ts"

export const TOKEN_ENDPOINT_PATH = "/oauth/token"
export const JWKS_PATH = "/.well-known/jwks.json"
export const DISCOVERY_PATH = "/.well-known/oauth-authorization-server"

export interface AuthorizationServerMetadata {
  readonly issuer: string
  readonly token_endpoint: string
  readonly jwks_uri: string
  readonly scopes_supported: ReadonlyArray<string>
  readonly grant_types_supported: ReadonlyArray<string>
  readonly token_endpoint_auth_methods_supported: ReadonlyArray<string>
  readonly response_types_supported: ReadonlyArray<string>
  readonly service_documentation: string
}

export const discoveryDocument = (config: { readonly publicBaseUrl: string }): AuthorizationServerMetadata => ({
  issuer: config.publicBaseUrl,
  token_endpoint: `${config.publicBaseUrl}${TOKEN_ENDPOINT_PATH}`,
  jwks_uri: `${config.publicBaseUrl}${JWKS_PATH}`,
  scopes_supported: [...Scopes],
  // Explicit: the RFC 8414 default would be ["authorization_code", "implicit"].
  grant_types_supported: ["client_credentials"],
  token_endpoint_auth_methods_supported: ["client_secret_basic"],
  // RFC 8414 §2 makes this member REQUIRED, yet no response type applies: client credentials never uses
  // the authorization endpoint. An empty list states exactly that (§3.2's "omit empty claims" conflicts;
  // we follow §2 so that strict validators find the member).
  response_types_supported: [],
  service_documentation: `${config.publicBaseUrl}/docs`
})
