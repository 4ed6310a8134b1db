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
 * Why a client authentication failed. For logs and metrics only: the wire answer is the same
 * `invalid_client` whatever the reason, so that callers learn neither which ids exist nor which check
 * refused an assertion.
 */
export type ClientAuthFailure =
  | "unknown_client"
  | "wrong_secret"
  | "revoked"
  /** The client is registered for the other method (a secret for a key client, or the reverse). */
  | "wrong_method"
  // private_key_jwt (RFC 7523 §3): the assertion's type, form, algorithm, key, signature, claims, reuse.
  | "assertion_type"
  | "malformed_assertion"
  | "assertion_alg"
  | "issuer_subject"
  | "client_id_mismatch"
  | "unknown_kid"
  | "bad_signature"
  | "audience"
  | "expired"
  | "exp_too_far"
  | "iat_in_future"
  | "missing_claim"
  | "replayed_jti"
  /** The client's jwks_uri could not be fetched, or may not be (address refused, http in production). */
  | "jwks_unavailable"

export class ClientAuthFailed extends Data.TaggedError("ClientAuthFailed")<{
  readonly reason: ClientAuthFailure
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
