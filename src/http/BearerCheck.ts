/**
 * The edge's question about an Authorization header (CONTRACT C6): whose valid access token is it?
 * The edge asks before the HttpApi runs, since the answer picks the rate-limit tier, and keeps the
 * verdict for the Bearer middleware. The OAuth capability answers it (src/oauth/bearerMiddleware.ts):
 * like ReadyAnswers.ts, a port declared here so that http reaches a capability only through its own.
 */
import { Context, type Effect } from "effect"
import type { Caller } from "../api/Api.ts"

/** A checked token: its caller, or why it was refused (`detail` is safe for the wire: 401 invalid_token). */
export type BearerVerdict =
  | { readonly caller: Caller }
  | { readonly invalid: { readonly detail: string } }

export class BearerCheck extends Context.Service<BearerCheck, {
  /**
   * Checks the header for no particular scope (the operation's scope is the middleware's to check);
   * undefined when the header asks for anonymous access.
   */
  readonly verify: (authorization: string) => Effect.Effect<BearerVerdict | undefined>
}>()("app/http/BearerCheck") {}
