/**
 * Scope handling for the OAuth core: the RFC 6749 §3.3 syntax and the canonical order. Which scopes
 * exist is the contract's fact (`Scopes` in src/api/schemas.ts); it is only re-exported here.
 */
import { Schema } from "effect"
import { type Scope, Scopes } from "../api/schemas.ts"

export { type Scope, Scopes }

/** One known scope, for file formats. */
export const ScopeSchema = Schema.Literals(Scopes)

export const isScope = (value: string): value is Scope => (Scopes as ReadonlyArray<string>).includes(value)

/** RFC 6749 §3.3: `scope-token *( SP scope-token )`, scope-token = 1*( %x21 / %x23-5B / %x5D-7E ). */
const SCOPE_SYNTAX = /^[\x21\x23-\x5B\x5D-\x7E]+(?: [\x21\x23-\x5B\x5D-\x7E]+)*$/

export type ScopeParse =
  | { readonly _tag: "Ok"; readonly scopes: ReadonlyArray<Scope> }
  | { readonly _tag: "Malformed" }
  | { readonly _tag: "Unknown"; readonly tokens: ReadonlyArray<string> }

/**
 * Parses a space-delimited scope string. Scope tokens are case-sensitive (RFC 6749 §3.3), so `Rates:read`
 * is unknown. Repeated tokens collapse; the result is in canonical (`Scopes`) order.
 */
export const parseScopeString = (value: string): ScopeParse => {
  if (!SCOPE_SYNTAX.test(value)) return { _tag: "Malformed" }
  const tokens = value.split(" ")
  const unknown = tokens.filter((t) => !isScope(t))
  if (unknown.length > 0) return { _tag: "Unknown", tokens: unknown }
  return { _tag: "Ok", scopes: canonicalScopes(tokens as ReadonlyArray<Scope>) }
}

/** De-duplicated, in the order of `Scopes`, so equal sets print equally. */
export const canonicalScopes = (scopes: Iterable<Scope>): ReadonlyArray<Scope> => {
  const set = new Set(scopes)
  return Scopes.filter((s) => set.has(s))
}

export const formatScopes = (scopes: ReadonlyArray<Scope>): string => canonicalScopes(scopes).join(" ")
