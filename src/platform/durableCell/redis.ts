/**
 * DurableCell in Redis (REDIS_URL): shared by every instance. The compare-and-set is one script, so
 * it is atomic whatever the number of instances racing.
 */
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import { DurableCell, DurableCellError, type DurableCellShape } from "./DurableCell.ts"

/** KEYS[1]: the cell; ARGV[1]: "1" when a value is expected, ARGV[2]: it, ARGV[3]: the new value. */
const compareAndSetScript = Redis.script(
  (key: string, expected: string | undefined, next: string) => [key, expected === undefined ? "0" : "1", expected ?? "", next],
  {
    numberOfKeys: 1,
    lua: `
local current = redis.call("GET", KEYS[1])
if (ARGV[1] == "0" and current == false) or (ARGV[1] == "1" and current == ARGV[2]) then
  redis.call("SET", KEYS[1], ARGV[3])
  return 1
end
return 0
`
  }
).withReturnType<number>()

const reasonOf = (error: Redis.RedisError) => {
  const cause = error.cause as { code?: string; message?: string } | undefined
  return cause?.code ?? cause?.message ?? String(cause)
}

export const makeRedisCell = (redis: Redis.Redis["Service"], prefix: string): DurableCellShape => {
  const fail = (error: Redis.RedisError) => new DurableCellError({ store: "redis", reason: reasonOf(error) })
  const compareAndSet = redis.eval(compareAndSetScript)
  return {
    store: "redis",
    // TIME: seconds and microseconds, as strings.
    now: redis.send<[string, string]>("TIME").pipe(
      Effect.map(([seconds, micros]) => Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)),
      Effect.mapError(fail)
    ),
    get: (name) =>
      redis.send<string | null>("GET", `${prefix}${name}`).pipe(
        Effect.map((value) => value ?? undefined),
        Effect.mapError(fail)
      ),
    compareAndSet: (name, expected, next) =>
      compareAndSet(`${prefix}${name}`, expected, next).pipe(Effect.map((set) => set === 1), Effect.mapError(fail))
  }
}

/** Cells under `prefix` (REDIS_KEY_PREFIX) in the shared Redis. */
export const layerRedis = (prefix: string): Layer.Layer<DurableCell, never, Redis.Redis> =>
  Layer.effect(DurableCell, Effect.map(Effect.service(Redis.Redis), (redis) => makeRedisCell(redis, `${prefix}cell:`)))
