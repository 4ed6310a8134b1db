/**
 * Answers a capability holds ready in memory (the health report, a rates answer given moments ago).
 * The edge consults them after it has counted the request and before the HttpApi, so a ready answer
 * gets the same headers, limits, log line, metrics and span as any other response, whatever the
 * configuration: it only skips the HttpApi's routing, decoding and encoding.
 */
import { Context } from "effect"
import type { OperationId } from "../api/Api.ts"

/**
 * A 200 that browsers and shared caches may keep (C4 "Cacheable reads"): the edge writes it with its
 * ETag and Cache-Control, or answers 304 when the request's If-None-Match names the ETag.
 */
export interface CacheableBody {
  readonly body: Uint8Array
  /** A strong validator of `body` (conditional.ts `strongEtag`). */
  readonly etag: string
  readonly cacheControl: string
}

export interface ReadyAnswer {
  /** The HttpApi operation answered; its path and methods come from the contract. */
  readonly operationId: OperationId
  /**
   * The 200 `application/json` body for this request (`no-store`, as every response by default, or a
   * CacheableBody), or undefined to let the HttpApi answer it.
   * `input` is what the edge decoded with the operation's own schema, so a request the HttpApi would
   * refuse never gets here: a POST's body (its payload schema), a GET's or HEAD's query (its query
   * schema; undefined when it declares none). `clientIp` is the caller's address (TRUST_PROXY's,
   * canonical), asked only for anonymous requests. Synchronous, no I/O (it may note in memory who
   * asked: the rates demand).
   */
  readonly answer: (input: unknown, clientIp?: string) => string | Uint8Array | CacheableBody | undefined
}

export class ReadyAnswers extends Context.Service<ReadyAnswers, ReadonlyArray<ReadyAnswer>>()("app/ReadyAnswers") {}
