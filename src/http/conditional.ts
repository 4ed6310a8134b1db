/**
 * Validators (RFC 9110 §8.8.3, §13.1.2): the strong ETag of a body, and whether a request's
 * If-None-Match names it, for the edge's 304s (edgeResponses.ts, apiErrors.ts) and the documents'.
 */
import { createHash } from "node:crypto"

/** The tag of a body: its SHA-256, base64url, 162 bits of it (27 characters), unquoted. */
export const bodyTag = (body: Uint8Array): string => createHash("sha256").update(body).digest("base64url").slice(0, 27)

/** A strong ETag of `body`: the same bytes, the same tag, whichever request or instance made them. */
export const strongEtag = (body: Uint8Array): string => `"${bodyTag(body)}"`

/** If-None-Match (RFC 9110 §13.1.2): weak comparison, `*` matches any. */
export const ifNoneMatchMatches = (field: string | undefined, etag: string): boolean => {
  if (field === undefined) return false
  if (field.trim() === "*") return true
  return field.split(",").some((candidate) => candidate.trim().replace(/^W\//, "") === etag)
}
