/**
 * Leadership through Redis (REDIS_URL): a role is a lease, a key holding its holder's id for `leaseMs`
 * (20 s), renewed every `checkMs` (5 s) by its holder and tried as often by the others, so that when the
 * holder goes the role moves within `leaseMs + checkMs` (25 s), and at once when it stops cleanly (the
 * lease is released). The channels are Redis pub/sub.
 *
 * While Redis is away an instance cannot know who holds a role: it leads (as without Redis, one per
 * process) and gives the role back when Redis answers again and another holds it.
 */
import { randomUUID } from "node:crypto"
import { type Cause, Duration, Effect, Fiber, Layer, Queue } from "effect"
import { Redis } from "effect/persistence"
import { makeRedisLease } from "../redisLease.ts"
import { Leadership, type LeadershipShape } from "./Leadership.ts"

export interface LeadershipRedisOptions {
  /** Prefix of the leases' keys and the channels (REDIS_KEY_PREFIX). */
  readonly prefix: string
  readonly leaseMs?: number
  readonly checkMs?: number
}

const make = (redis: Redis.Redis["Service"], options: LeadershipRedisOptions): LeadershipShape => {
  const leaseMs = options.leaseMs ?? 20_000
  const checkMs = options.checkMs ?? 5_000
  const { hold, release } = makeRedisLease(redis)

  const run: LeadershipShape["run"] = (name, roles) =>
    Effect.gen(function*() {
      const id = randomUUID()
      const key = `${options.prefix}lease:${name}`
      let role: "lead" | "follow" | undefined
      let running: Fiber.Fiber<void> | undefined
      // Held or free: lead; another's: follow; Redis away or slow: lead alone meanwhile.
      const decide = hold(key, id, leaseMs).pipe(
        Effect.timeout(Duration.millis(checkMs)),
        Effect.map((held): "lead" | "follow" => (held ? "lead" : "follow")),
        Effect.orElseSucceed((): "lead" | "follow" => "lead")
      )
      const step = Effect.gen(function*() {
        const next = yield* decide
        // The same role, still at work: nothing to do (a role that ended, e.g. a listener Redis dropped, starts again).
        if (next === role && running !== undefined && running.pollUnsafe() === undefined) return
        if (running !== undefined) yield* Fiber.interrupt(running)
        role = next
        running = yield* Effect.forkScoped(next === "lead" ? roles.lead : roles.follow)
      })
      yield* Effect.addFinalizer(() =>
        role === "lead" ? release(key, id).pipe(Effect.timeout(Duration.seconds(1)), Effect.ignore) : Effect.void
      )
      yield* step.pipe(Effect.andThen(Effect.sleep(Duration.millis(checkMs))), Effect.forever, Effect.forkScoped)
    })

  const listen = (channel: string) =>
    Effect.gen(function*() {
      const out = yield* Queue.unbounded<string, Cause.Done>()
      const messages = yield* redis.subscribe(`${options.prefix}${channel}`)
      yield* Queue.take(messages).pipe(
        Effect.flatMap((message) => Queue.offer(out, message.message)),
        Effect.forever,
        // Redis away: the listener ends, and its reader with it (it leads, or listens again, by the next check).
        Effect.catchCause(() => Queue.end(out)),
        Effect.forkScoped
      )
      return out
    })

  return {
    run,
    publish: (channel, message) => redis.send("PUBLISH", `${options.prefix}${channel}`, message).pipe(Effect.ignore),
    listen
  }
}

/** Roles and channels under `prefix` (REDIS_KEY_PREFIX) in the shared Redis. */
export const layerRedis = (options: LeadershipRedisOptions): Layer.Layer<Leadership, never, Redis.Redis> =>
  Layer.effect(Leadership, Effect.map(Effect.service(Redis.Redis), (redis) => make(redis, options)))
