/**
 * Typed errors of the OAuth core. None of them carries a secret, a token or a key: their fields are safe
 * to log. `detail` fields are also safe to send to callers. State files fail with `FileError`
 * (src/platform/files.ts).
 */
import { Data } from "effect"
import type { Scope } from "./scopes.ts"

/** CLI or test input that the registry refuses (bad name, unknown scope, empty id, ...). */
export class InvalidClientInput extends Data.TaggedError("InvalidClientInput")<{
  readonly field: string
  readonly reason: string
}> {
  override get message() {
    return `${this.field}: ${this.reason}`
  }
}

export class ClientNotFound extends Data.TaggedError("ClientNotFound")<{ readonly clientId: string }> {
  override get message() {
    return `no client with id ${JSON.stringify(this.clientId)}`
  }
}

/** Rotating the secret of a revoked client is refused: revocation is final. */
export class ClientRevoked extends Data.TaggedError("ClientRevoked")<{ readonly clientId: string }> {
  override get message() {
    return `client ${JSON.stringify(this.clientId)} is revoked`
  }
}

/**
 * Client authentication failed. `reason` is for logs and metrics only: the wire answer is the same
 * `invalid_client` for all three, so that callers cannot tell which ids exist.
 */
export class ClientAuthFailed extends Data.TaggedError("ClientAuthFailed")<{
  readonly reason: "unknown_client" | "wrong_secret" | "revoked"
}> {}

export type InvalidTokenReason =
  | "malformed"
  | "bad_signature"
  | "unknown_kid"
  | "wrong_alg"
  | "wrong_typ"
  | "wrong_issuer"
  | "wrong_audience"
  | "expired"
  | "not_yet_valid"
  | "bad_claims"
  | "revoked_client"

/** → 401 problem `invalid_token` with `WWW-Authenticate: Bearer realm="api", error="invalid_token"`. */
export class InvalidToken extends Data.TaggedError("InvalidToken")<{
  readonly reason: InvalidTokenReason
  /** Safe for the wire: says what is wrong without internals. */
  readonly detail: string
}> {}

/** → 403 problem `insufficient_scope` with a Bearer challenge naming the missing scope. */
export class InsufficientScope extends Data.TaggedError("InsufficientScope")<{
  readonly requiredScope: Scope
  readonly grantedScopes: ReadonlyArray<Scope>
  readonly detail: string
}> {}

/** Signing keys come from configuration (OAUTH_SIGNING_KEYS): they cannot be rotated in place. */
export class KeyRotationUnavailable extends Data.TaggedError("KeyRotationUnavailable")<{
  readonly reason: string
}> {
  override get message() {
    return this.reason
  }
}
