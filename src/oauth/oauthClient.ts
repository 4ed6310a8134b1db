/**
 * A registered client (CONTRACT C6) as everybody but the registry sees it: no hash, no secret. The
 * registry (ClientRegistry.ts) and both of its stores (clientsFile.ts, store/clientsTable.ts) hold it.
 */
import type { ClientJwks } from "./clientKeys.ts"
import type { Scope } from "./scopes.ts"

/** Revocation is final: a revoked client never becomes active again. */
export const ClientStatuses = ["active", "revoked"] as const

/**
 * How a client authenticates at the token endpoint: one method per client (RFC 7591
 * `token_endpoint_auth_method`). A `private_key_jwt` client's public keys are held here (`Inline`) or
 * published by the client at its `jwks_uri` (`Uri`).
 */
export type ClientAuth =
  | { readonly method: "client_secret_basic" }
  | { readonly method: "private_key_jwt"; readonly keys: { readonly _tag: "Inline"; readonly jwks: ClientJwks } }
  | { readonly method: "private_key_jwt"; readonly keys: { readonly _tag: "Uri"; readonly uri: string } }

export const SECRET_AUTH: ClientAuth = { method: "client_secret_basic" }

export interface OAuthClient {
  readonly clientId: string
  readonly name: string
  readonly scopes: ReadonlyArray<Scope>
  readonly status: (typeof ClientStatuses)[number]
  readonly createdAt: string
  readonly rotatedAt: string | undefined
  /** The same object for as long as the client's keys do not change (verifiers are cached by it). */
  readonly auth: ClientAuth
}
