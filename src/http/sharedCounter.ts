/**
 * Request counts shared through Redis at close to in-memory cost (C8): each instance counts
 * in its own memory and reconciles with Redis in batches every `syncEveryMillis` (one script call
 * per batch: INCRBY of the local deltas, the global totals read back). A request is decided locally
 * from the global count last seen plus this instance's own counts not yet seen there, so the common
 * case costs no round trip.
 *
 * The bound: an instance admits locally while its unsynced count of a key stays under the slack,
 * floor(limit / 10); past it, the next request is decided by Redis itself (exact, one round trip).
 * Until Redis has seen a key's limit reached, at most `slack` of every instance's admissions are
 * invisible to the others, so N instances exceed a limit by at most N × slack per window (10% of
 * the limit per instance), and one instance never does. Below 10 per minute the slack is 0: every
 * count is exact in Redis, as before.
 *
 * Windows are fixed and aligned to the clock (one Redis key per key and minute). While Redis fails,
 * counting goes on in memory from the last global counts seen, and the deltas reach Redis when it
 * answers again (a delta whose answer timed out may be counted twice: an overcount, never an under).
 */
import { Clock, Duration, Effect, Schedule, type Scope } from "effect"
import { Redis } from "effect/persistence"

export interface Count {
  readonly allowed: boolean
  /** The count this instance knows after the decision (a refused request is not counted). */
  readonly used: number
  readonly resetMillis: number
}

export interface SharedCounts {
  /** A plain value when decided in memory; an Effect when Redis decides (the slack is spent). */
  readonly count: (key: string, limit: number) => Count | Effect.Effect<Count>
  /** Keys held in memory (tests). */
  readonly size: () => number
}

export interface SharedCountsOptions {
  readonly redis: Redis.Redis["Service"]
  /** Prefix of the Redis keys; `<prefix><key>:<window index>`. */
  readonly prefix: string
  readonly windowMillis: number
  readonly syncEveryMillis?: number
  /** A Redis answer slower than this counts as a failure. */
  readonly timeoutMillis?: number
}

/** Admissions an instance may make on a key without Redis having seen them. */
export const slackOf = (limit: number): number => Math.floor(limit / 10)

const reasonText = (reason: unknown): string => {
  const cause = (reason as { cause?: { message?: unknown } } | undefined)?.cause
  return typeof cause?.message === "string" ? cause.message : String(reason)
}

/** Keys per script call: a batch stays a small, quick command. */
const batchSize = 256

/** KEYS: counters; ARGV[1]: TTL in ms, ARGV[1 + i]: the delta of KEYS[i]. Returns the totals. */
const syncScript = Redis.script(
  (keys: ReadonlyArray<string>, deltas: ReadonlyArray<number>, ttlMillis: number) => [...keys, ttlMillis, ...deltas],
  {
    numberOfKeys: (keys) => keys.length,
    lua: `
local totals = {}
for i, key in ipairs(KEYS) do
  totals[i] = redis.call("INCRBY", key, ARGV[i + 1])
  redis.call("PEXPIRE", key, ARGV[1])
end
return totals
`
  }
).withReturnType<ReadonlyArray<number>>()

/** Flushes a delta, then takes one request if the total stays within the limit: [total, taken]. */
const takeScript = Redis.script(
  (key: string, delta: number, limit: number, ttlMillis: number) => [key, delta, limit, ttlMillis],
  {
    numberOfKeys: 1,
    lua: `
local total = redis.call("INCRBY", KEYS[1], ARGV[1])
local taken = 0
if total + 1 <= tonumber(ARGV[2]) then
  total = redis.call("INCRBY", KEYS[1], 1)
  taken = 1
end
redis.call("PEXPIRE", KEYS[1], ARGV[3])
return { total, taken }
`
  }
).withReturnType<readonly [number, number]>()

interface Entry {
  readonly window: number
  /** The global count Redis last returned (includes this instance's synced counts). */
  known: number
  /** Admitted here, not yet sent. */
  pending: number
  /** Sent, answer not yet back. */
  inflight: number
}

export const makeSharedCounts = (options: SharedCountsOptions): Effect.Effect<SharedCounts, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { redis, prefix, windowMillis } = options
    const timeout = Duration.millis(options.timeoutMillis ?? 250)
    const ttlMillis = windowMillis * 2
    const clock = yield* Clock.clockWith(Effect.succeed)
    const sync = redis.eval(syncScript)
    const take = redis.eval(takeScript)
    const entries = new Map<string, Entry>()
    const dirty = new Set<string>()
    let degraded = false
    let sweptWindow = 0

    const redisKey = (key: string, e: Entry) => `${prefix}${key}:${e.window}`

    const failed = (reason: unknown) =>
      Effect.suspend(() => {
        if (degraded) return Effect.void
        degraded = true
        return Effect.logWarning("rate limits: shared store failed, counting in memory", reasonText(reason))
      })
    const answered = Effect.suspend(() => {
      if (!degraded) return Effect.void
      degraded = false
      return Effect.logInfo("rate limits: shared store is back")
    })

    const withTimeout = <A>(call: Effect.Effect<A, Redis.RedisError>) =>
      Effect.timeoutOrElse(call, { duration: timeout, orElse: () => Effect.fail("timed out" as const) })

    /** Decides in memory; `local` also when Redis is away (the slack then does not apply). */
    const decideLocally = (e: Entry, limit: number, resetMillis: number, key: string): Count => {
      const used = e.known + e.pending + e.inflight
      if (used >= limit) return { allowed: false, used, resetMillis }
      e.pending++
      dirty.add(key)
      return { allowed: true, used: used + 1, resetMillis }
    }

    const exact = (key: string, e: Entry, limit: number, resetMillis: number): Effect.Effect<Count> =>
      Effect.suspend(() => {
        const delta = e.pending
        e.pending = 0
        e.inflight += delta
        return withTimeout(take(redisKey(key, e), delta, limit, ttlMillis)).pipe(
          Effect.flatMap(([total, taken]) => {
            e.inflight -= delta
            e.known = Math.max(e.known, total)
            return Effect.as(answered, { allowed: taken === 1, used: total, resetMillis })
          }),
          Effect.catch((reason) => {
            e.inflight -= delta
            e.pending += delta
            return Effect.as(failed(reason), decideLocally(e, limit, resetMillis, key))
          })
        )
      })

    const count: SharedCounts["count"] = (key, limit) => {
      const now = clock.currentTimeMillisUnsafe()
      const window = Math.floor(now / windowMillis)
      const resetMillis = (window + 1) * windowMillis - now
      let e = entries.get(key)
      if (e === undefined || e.window !== window) {
        e = { window, known: 0, pending: 0, inflight: 0 }
        entries.set(key, e)
      }
      if (degraded || e.known + e.pending + e.inflight >= limit || e.pending + e.inflight < slackOf(limit)) {
        return decideLocally(e, limit, resetMillis, key)
      }
      return exact(key, e, limit, resetMillis)
    }

    /** Entries of past windows go, once per window; their unsynced counts no longer matter. */
    const sweep = (window: number) => {
      sweptWindow = window
      for (const [key, e] of entries) {
        if (e.window < window) {
          entries.delete(key)
          dirty.delete(key)
        }
      }
    }

    const flushBatch = (batch: ReadonlyArray<readonly [string, Entry, number]>) =>
      withTimeout(sync(batch.map(([key, e]) => redisKey(key, e)), batch.map(([, , delta]) => delta), ttlMillis)).pipe(
        Effect.flatMap((totals) => {
          batch.forEach(([, e, delta], i) => {
            e.inflight -= delta
            e.known = Math.max(e.known, Number(totals[i]))
          })
          return answered
        }),
        Effect.catch((reason) => {
          for (const [key, e, delta] of batch) {
            e.inflight -= delta
            e.pending += delta
            dirty.add(key)
          }
          return failed(reason)
        })
      )

    const flush = Effect.suspend(() => {
      const window = Math.floor(clock.currentTimeMillisUnsafe() / windowMillis)
      if (window !== sweptWindow) sweep(window)
      if (dirty.size === 0) return Effect.void
      const batches: Array<Array<readonly [string, Entry, number]>> = [[]]
      for (const key of dirty) {
        const e = entries.get(key)
        if (e === undefined || e.pending === 0) continue
        if (batches[batches.length - 1]!.length === batchSize) batches.push([])
        batches[batches.length - 1]!.push([key, e, e.pending])
        e.inflight += e.pending
        e.pending = 0
      }
      dirty.clear()
      return Effect.forEach(batches, flushBatch, { discard: true })
    })

    yield* Effect.forkScoped(Effect.repeat(flush, Schedule.spaced(Duration.millis(options.syncEveryMillis ?? 100))))
    // A stopping instance hands its last counts over.
    yield* Effect.addFinalizer(() => flush)

    return { count, size: () => entries.size }
  })
