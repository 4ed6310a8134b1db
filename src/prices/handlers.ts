/**
 * GET /api/v1/prices/stream on the HttpApi's side (C10): what the edge does not open itself (an absolute-form
 * target) is served from the same hub, its refusals as the contract's problems, its body as an Effect stream.
 */
import { Cause, Effect, Queue, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api, CurrentClient } from "../api/Api.ts"
import { NoValidSymbols, RateLimited, ServiceUnavailable, UpstreamError, ValidationFailed } from "../api/problems.ts"
import { exchangeOf } from "../http/exchange.ts"
import { openRequestOf, problemOf } from "./eventStream.ts"
import type { Refusal, StreamSink } from "./hub.ts"
import { PriceHub } from "./PriceHub.ts"

/** Its queue holds messages, not bytes: each counts this much toward the lagging bound. */
const QUEUED_MESSAGE_BYTES = 1024

const problemFor = (refusal: Refusal) => {
  const [code, extra] = problemOf(refusal)
  switch (code) {
    case "no_valid_symbols":
      return new NoValidSymbols({ detail: extra.detail, unknown: extra.unknown as ReadonlyArray<string> })
    case "validation_failed":
      return new ValidationFailed({ detail: extra.detail, errors: extra.errors as ReadonlyArray<{ pointer: string; detail: string }> })
    case "rate_limited":
      return new RateLimited({ detail: extra.detail, retryAfter: extra.retryAfter as number })
    case "service_unavailable":
      return new ServiceUnavailable({ detail: extra.detail, retryAfter: extra.retryAfter as number })
    default:
      return new UpstreamError({ detail: extra.detail })
  }
}

/** A sink the hub writes to, read as an Effect stream; the hub's `close` listener runs when the stream ends. */
const queuedSink = () => {
  let queue: Queue.Queue<Uint8Array, Cause.Done> | undefined
  const pending: Array<Uint8Array> = []
  let ended = false
  let onClose: (() => void) | undefined
  const sink: StreamSink = {
    write: (chunk) => queue === undefined ? pending.push(chunk) : Queue.offerUnsafe(queue, chunk),
    get writableLength() {
      return (queue === undefined ? pending.length : Queue.sizeUnsafe(queue)) * QUEUED_MESSAGE_BYTES
    },
    end: () => {
      ended = true
      if (queue !== undefined) Queue.endUnsafe(queue)
    },
    destroy: () => sink.end(),
    once: (_event, listener) => void (onClose = listener)
  }
  const body = Stream.callback<Uint8Array>((q) =>
    Effect.suspend(() => {
      queue = q
      for (const chunk of pending.splice(0)) Queue.offerUnsafe(q, chunk)
      if (ended) Queue.endUnsafe(q)
      return Effect.addFinalizer(() => Effect.sync(() => onClose?.()))
    })
  )
  return { sink, body }
}

export const PricesHandlers = HttpApiBuilder.group(
  Api,
  "prices",
  Effect.fn(function*(handlers) {
    const hub = yield* PriceHub
    return handlers.handle("streamPrices", ({ query, request }) =>
      Effect.flatMap(Effect.service(CurrentClient), (client) =>
        Effect.callback<HttpServerResponse.HttpServerResponse, ReturnType<typeof problemFor>>((resume) => {
          hub.open(openRequestOf(query, exchangeOf(request)?.clientIp ?? "unknown", client?.clientId), {
            refuse: (refusal) => resume(Effect.fail(problemFor(refusal))),
            start: () => {
              const { body, sink } = queuedSink()
              resume(Effect.succeed(HttpServerResponse.stream(body, {
                contentType: "text/event-stream; charset=utf-8",
                headers: { "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" }
              })))
              return sink
            }
          })
        })))
  })
)
