/**
 * A lease in Redis: a key holding its holder's id for a time, taken when free, renewed by its holder, given back only
 * by it. One script each, so that racing instances never both hold it. Used by leadership (platform/leadership) and by
 * a shared load of the rates' copies (rates/copies/CopyStore.ts).
 */
import { Effect } from "effect"
import { Redis } from "effect/persistence"

/** KEYS[1]: the lease; ARGV[1]: the holder's id, ARGV[2]: its time to live (ms). Takes a free lease or renews ours: 1, else 0. */
const holdScript = Redis.script((key: string, id: string, ttlMs: number) => [key, id, String(ttlMs)], {
  numberOfKeys: 1,
  lua: `
local holder = redis.call("GET", KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return 1
end
return 0
`
}).withReturnType<number>()

/** Gives the lease back if it is still ours. */
const releaseScript = Redis.script((key: string, id: string) => [key, id], {
  numberOfKeys: 1,
  lua: `
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
`
}).withReturnType<number>()

export interface RedisLease {
  /** Takes `key` for `id` for `ttlMs`, or renews it when `id` holds it: true; false while another holds it. */
  readonly hold: (key: string, id: string, ttlMs: number) => Effect.Effect<boolean, Redis.RedisError>
  /** Gives `key` back if `id` still holds it. */
  readonly release: (key: string, id: string) => Effect.Effect<void, Redis.RedisError>
}

export const makeRedisLease = (redis: Redis.Redis["Service"]): RedisLease => {
  const hold = redis.eval(holdScript)
  const release = redis.eval(releaseScript)
  return {
    hold: (key, id, ttlMs) => hold(key, id, ttlMs).pipe(Effect.map((held) => held === 1)),
    release: (key, id) => Effect.asVoid(release(key, id))
  }
}
