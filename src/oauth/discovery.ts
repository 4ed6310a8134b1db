/**
 * RFC 8414 authorization server metadata, served at GET /.well-known/oauth-authorization-server.
 * `issuer` is PUBLIC_BASE_URL byte for byte: clients compare it with the URL they built the request
 * from, and oauth4webapi compares the JWT `iss` with it as a plain string. Paths come from the contract.
 */
import { Api } from "../api/Api.ts"
import { type AuthorizationServerMetadata, ClientAssertionAlgorithms, Scopes, TokenEndpointAuthMethods } from "../api/schemas.ts"
import { documentPaths } from "../http/documentRoutes.ts"

const endpoints = Api.groups.oauth.endpoints

export const discoveryDocument = (config: { readonly publicBaseUrl: string }): typeof AuthorizationServerMetadata.Type => ({
  issuer: config.publicBaseUrl,
  token_endpoint: `${config.publicBaseUrl}${endpoints.requestToken.path}`,
  jwks_uri: `${config.publicBaseUrl}${endpoints.getJwks.path}`,
  scopes_supported: [...Scopes],
  // Explicit: the RFC 8414 default would be ["authorization_code", "implicit"].
  grant_types_supported: ["client_credentials"],
  token_endpoint_auth_methods_supported: [...TokenEndpointAuthMethods],
  // What a private_key_jwt client may sign its assertions with (RFC 8414 §2).
  token_endpoint_auth_signing_alg_values_supported: [...ClientAssertionAlgorithms],
  // RFC 8414 §2 makes this member REQUIRED, yet no response type applies: client credentials never uses
  // the authorization endpoint. An empty list states exactly that (§3.2's "omit empty claims" conflicts;
  // we follow §2 so that strict validators find the member).
  response_types_supported: [],
  service_documentation: `${config.publicBaseUrl}${documentPaths.docs}`
})
