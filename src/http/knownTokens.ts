/**
 * Bearer tokens that verified here recently, by their Authorization header: the edge counts them in
 * their client's tier before verifying them again (edge.ts), so an exhausted anonymous tier at the
 * address never blocks a token already shown to be valid. Only valid tokens enter, so callers
 * without one cannot fill it; it is bounded all the same, oldest out first, and an entry lasts no
 * longer than a token can (TOKEN_TTL_SECONDS).
 */
import type { Caller } from "../api/Api.ts"

const maxEntries = 4096

export class KnownTokens {
  private readonly entries = new Map<string, { readonly caller: Caller; readonly until: number }>()
  private readonly ttlSeconds: number
  constructor(ttlSeconds: number) {
    this.ttlSeconds = ttlSeconds
  }

  get(authorization: string): Caller | undefined {
    const entry = this.entries.get(authorization)
    if (entry === undefined) return undefined
    if (entry.until > Date.now()) return entry.caller
    this.entries.delete(authorization)
    return undefined
  }

  remember(authorization: string, caller: Caller): void {
    if (this.entries.size >= maxEntries) this.entries.delete(this.entries.keys().next().value!)
    this.entries.set(authorization, { caller, until: Date.now() + this.ttlSeconds * 1000 })
  }

  forget(authorization: string): void {
    this.entries.delete(authorization)
  }
}
