/**
 * The Redis connection shared by rate limits, the rates cache and the upstream guards when REDIS_URL
 * is set. Commands fail fast while Redis is away (no offline queue), and every user of Redis then
 * falls back to memory, so a Redis outage costs sharing, never answers.
 *
 * Redis may also be away when the process starts (it often starts later): the service then starts
 * without it, says so in the log, and connects in the background; `/readyz` reports it meanwhile.
 * Only a refused password stops the start-up: no retry can fix it (C9).
 */
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { Context, Effect, Exit, Layer, Queue, Redacted, Schedule, Scope } from "effect"
import { Redis } from "effect/persistence"
import { ConfigInvalid } from "./config/ConfigInvalid.ts"
import { Readiness } from "./lifecycle/Readiness.ts"

/** One connection attempt: the first connection failure fails it; after that, outages are ridden out. */
const connection = (url: Redacted.Redacted<string>) => {
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

const reasonOf = (error: Redis.RedisError) => {
  const cause = error.cause as { code?: string; message?: string } | undefined
  return cause?.code ?? cause?.message ?? String(cause)
}

/** Redis answered but refused us: a wrong REDIS_URL, not an outage. */
const isRefusedCredentials = (error: Redis.RedisError) => /WRONGPASS|NOAUTH|NOPERM|invalid password/i.test(reasonOf(error))

const notConnected = () => new Redis.RedisError({ cause: new Error("Redis is not connected yet") })

const make = (url: Redacted.Redacted<string>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    let current: Redis.Redis["Service"] | undefined
    const attempt = Effect.gen(function*() {
      const attemptScope = yield* Scope.fork(scope, "sequential")
      const built = yield* Effect.exit(Layer.buildWithScope(connection(url), attemptScope))
      if (Exit.isSuccess(built)) return void (current = Context.get(built.value, Redis.Redis))
      // A failed client must not hold a finalizer (and a socket) for the life of the process.
      yield* Scope.close(attemptScope, built)
      return yield* Effect.failCause(built.cause)
    })

    const first = yield* Effect.exit(attempt)
    if (Exit.isFailure(first)) {
      const error = Exit.findErrorOption(first)
      if (error._tag === "Some" && isRefusedCredentials(error.value)) {
        return yield* new ConfigInvalid({
          problems: [`REDIS_URL: Redis refused the credentials (${reasonOf(error.value)}); fix the user and password in the URL`]
        })
      }
      yield* Effect.logWarning(
        "Redis unreachable at start-up: limits and caches are kept in memory until it answers; connecting in the background",
        error._tag === "Some" ? reasonOf(error.value) : "unknown"
      )
      yield* attempt.pipe(
        Effect.retry(Schedule.min([Schedule.exponential("200 millis"), Schedule.spaced("5 seconds")])),
        Effect.andThen(Effect.logInfo("Redis connected: limits and caches are shared again")),
        Effect.forkIn(scope)
      )
    }

    const readiness = yield* Readiness
    yield* readiness.addCheck(
      "redis",
      Effect.suspend(() =>
        current === undefined
          ? Effect.fail("not connected")
          : current.send("PING").pipe(Effect.mapError((e) => `unreachable (${reasonOf(e)})`))
      ).pipe(Effect.asVoid)
    )

    // Every call goes to the connection of the moment, or fails at once as Redis being away does.
    return Redis.Redis.of({
      send: (command, ...args) => Effect.suspend(() => current === undefined ? Effect.fail(notConnected()) : current.send(command, ...args)),
      eval: (script) => (...params) =>
        Effect.suspend(() => current === undefined ? Effect.fail(notConnected()) : current.eval(script)(...params)),
      reserve: Effect.suspend(() => current === undefined ? Effect.fail(notConnected()) : current.reserve),
      subscribe: (channel) =>
        Effect.suspend(() =>
          current !== undefined
            ? current.subscribe(channel)
            : Effect.tap(Queue.unbounded<Redis.RedisMessage, Redis.RedisError>(), (queue) => Queue.fail(queue, notConnected()))
        )
    })
  })

/** `Redis` for REDIS_URL; needs `Readiness`, to which it adds its check. */
export const RedisLive = (url: Redacted.Redacted<string>): Layer.Layer<Redis.Redis, ConfigInvalid, Readiness> =>
  Layer.effect(Redis.Redis, make(url))
