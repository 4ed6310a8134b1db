/**
 * The processes sharing a Redis (REDIS_URL): each marks itself present every `markMs` (10 s) in a sorted set scored by
 * Redis's own clock (hosts' clocks may differ), marks older than three periods dropped, and reads how many remain;
 * its mark is taken back when it stops. While Redis is away the count last read stands.
 */
import { randomUUID } from "node:crypto"
import { Duration, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import { ProcessCount } from "./ProcessCount.ts"

/** KEYS[1]: the set; ARGV[1]: this process's id, ARGV[2]: how old a mark may be (ms). Marks it present: how many are. */
const markScript = Redis.script((key: string, id: string, keepMs: number) => [key, id, String(keepMs)], {
  numberOfKeys: 1,
  lua: `
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call("ZADD", KEYS[1], now, ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - tonumber(ARGV[2]))
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return redis.call("ZCARD", KEYS[1])
`
}).withReturnType<number>()

export interface ProcessCountRedisOptions {
  /** Prefix of the set's key (REDIS_KEY_PREFIX): one count per deployment. */
  readonly prefix: string
  /** This host's workers: the count until Redis has answered, and never less. */
  readonly workers: number
  readonly markMs?: number
}

export const layerRedis = (options: ProcessCountRedisOptions): Layer.Layer<ProcessCount, never, Redis.Redis> =>
  Layer.effect(
    ProcessCount,
    Effect.gen(function*() {
      const redis = yield* Redis.Redis
      const markMs = options.markMs ?? 10_000
      const key = `${options.prefix}processes`
      const id = randomUUID()
      let seen = 0
      const mark = redis.eval(markScript)(key, id, 3 * markMs).pipe(
        Effect.timeout(Duration.millis(markMs)),
        Effect.tap((count) => Effect.sync(() => (seen = count))),
        Effect.ignore
      )
      yield* Effect.addFinalizer(() => Effect.ignore(Effect.timeout(redis.send("ZREM", key, id), Duration.seconds(1))))
      yield* Effect.forkScoped(Effect.forever(Effect.andThen(mark, Effect.sleep(Duration.millis(markMs)))))
      return { current: () => Math.max(1, options.workers, seen) }
    })
  )
