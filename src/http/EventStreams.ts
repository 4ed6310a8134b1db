/**
 * Streams of events a capability answers (C10: the price stream, src/prices). The edge opens one after the
 * operation's rate-limit count, the Bearer check and the query's decode, as it consults a ready answer: the
 * capability refuses (a problem the edge writes) or asks the edge to write the 200 head, then writes the body
 * itself for as long as it lasts. The access-log line, metrics and span are written when the stream ends.
 */
import type { ServerResponse } from "node:http"
import { Context } from "effect"
import type { OperationId } from "../api/Api.ts"
import type { ProblemCode } from "../api/problems.ts"

interface EventStreamRequest {
  /** What the edge decoded with the operation's query schema. */
  readonly query: unknown
  /** The caller's address per TRUST_PROXY, canonical. */
  readonly clientIp: string
  /** The client of a valid Bearer token (with the operation's scope), else undefined. */
  readonly clientId: string | undefined
}

export interface EventStreamAnswer {
  /** A problem before anything is written (`retryAfter` in `extra` becomes Retry-After). */
  readonly refuse: (code: ProblemCode, extra: { readonly detail: string; readonly [member: string]: unknown }) => void
  /**
   * Writes the 200 head: the edge's headers and the stream's (text/event-stream, no-cache, no-transform, no proxy
   * buffering). The response to write the body to; undefined for HEAD (ended here) or when the client has left.
   */
  readonly start: () => ServerResponse | undefined
}

export interface EventStream {
  readonly operationId: OperationId
  readonly open: (request: EventStreamRequest, answer: EventStreamAnswer) => void
}

export class EventStreams extends Context.Service<EventStreams, {
  readonly streams: ReadonlyArray<EventStream>
  /** Ends every open stream at once and opens none from now on: draining begins (SIGTERM; C10). */
  readonly endAll: () => void
}>()("app/http/EventStreams") {}
