/**
 * The Redis connection shared by rate limits and the rates cache when REDIS_URL is set.
 * Commands fail fast while Redis is away (no offline queue), so callers fall back at once instead
 * of piling up; the client keeps reconnecting for as long as the process lives.
 */
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { Effect, Layer, Redacted } from "effect"

export const RedisLive = (url: Redacted.Redacted<string>) => {
  // Set once the first connection succeeded: before that, a failure should stop the start-up
  // (a wrong REDIS_URL is a configuration error); after it, every failure is an outage to ride out.
  let connectedOnce = false
  return NodeRedis.layer({
    url: Redacted.value(url),
    disableOfflineQueue: true,
    socket: {
      connectTimeout: 2_000,
      reconnectStrategy: (retries: number, cause: Error) => {
        if (!connectedOnce) return cause
        return Math.min(2 ** retries * 50, 2_000) + Math.floor(Math.random() * 100)
      }
    }
  }).pipe(Layer.tap(() => Effect.sync(() => (connectedOnce = true))))
}
