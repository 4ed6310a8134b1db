/**
 * What the edge learned of a request before the HttpApi runs (id, caller address, route, the Bearer
 * verdict), kept beside Node's request object so the Effect side reads it instead of working it
 * out again.
 */
import type { IncomingMessage } from "node:http"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import type { Tracer } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { BearerVerdict } from "./BearerCheck.ts"
import type { RouteMatch } from "./routeTable.ts"

export interface Exchange {
  readonly requestId: string
  /** The caller's address per TRUST_PROXY (C2), canonical; rate limits count its bucket (C8, clientIp.ts). */
  readonly clientIp: string
  readonly route: RouteMatch | undefined
  /** The request target without its query, as logged. */
  readonly path: string
  /** `performance.now()` when the edge took the request. */
  readonly started: number
  /** Headers every response to this request carries, as a flat name/value list (edge.ts). */
  headers: Array<string>
  /** The request's server span when traces are exported (observability/requestSpan.ts), else undefined. */
  readonly span: Tracer.Span | undefined
  /** Set when the request carried an Authorization header and the edge checked it. */
  bearer?: BearerVerdict
}

// A property of the request object, not a WeakMap: tens of thousands of entries a second in an
// ephemeron table cost the garbage collector more than the request's own objects.
const exchangeKey = Symbol("app/Exchange")
type WithExchange = IncomingMessage & { [exchangeKey]?: Exchange }

export const setExchange = (req: IncomingMessage, exchange: Exchange) => void ((req as WithExchange)[exchangeKey] = exchange)

export const exchangeOf = (request: HttpServerRequest.HttpServerRequest): Exchange | undefined =>
  (NodeHttpServerRequest.toIncomingMessage(request) as WithExchange)[exchangeKey]
