/**
 * A registered client (CONTRACT C6) as everybody but the registry sees it: no hash, no secret. The
 * registry (ClientRegistry.ts) and both of its stores (clientsFile.ts, store/clientsTable.ts) hold it.
 */
import type { Scope } from "./scopes.ts"

/** Revocation is final: a revoked client never becomes active again. */
export const ClientStatuses = ["active", "revoked"] as const

export interface OAuthClient {
  readonly clientId: string
  readonly name: string
  readonly scopes: ReadonlyArray<Scope>
  readonly status: (typeof ClientStatuses)[number]
  readonly createdAt: string
  readonly rotatedAt: string | undefined
}
