/**
 * Who called an emulator, as a provider sees it (CONTRACT C9, "Calls to providers"): each call's
 * `User-Agent`, and whether it carried our trace context (`traceparent`, `b3`), which must never leave
 * our own systems. CoinGecko refuses a call without a User-Agent (403), Coinbase too (400): the
 * emulators use `userAgentOf` to refuse as they do, and these counts for tests to read.
 *
 * Runs on Node's type stripping: erasable TypeScript only.
 */
import type { IncomingMessage } from "node:http"

export interface CallersStats {
  /** Calls per `User-Agent` sent ("" for none). */
  readonly byUserAgent: Readonly<Record<string, number>>
  /** Calls that carried `traceparent` or `b3`. */
  readonly traced: number
}

/** The request's User-Agent, or undefined when it sent none or only blanks. */
export const userAgentOf = (req: IncomingMessage): string | undefined => {
  const value = req.headers["user-agent"]?.trim()
  return value === undefined || value === "" ? undefined : value
}

export const makeCallers = () => {
  let byUserAgent: Record<string, number> = {}
  let traced = 0
  return {
    note: (req: IncomingMessage) => {
      const agent = userAgentOf(req) ?? ""
      byUserAgent[agent] = (byUserAgent[agent] ?? 0) + 1
      if (req.headers.traceparent !== undefined || req.headers.b3 !== undefined) traced++
    },
    reset: () => {
      byUserAgent = {}
      traced = 0
    },
    stats: (): CallersStats => ({ byUserAgent: { ...byUserAgent }, traced })
  }
}
