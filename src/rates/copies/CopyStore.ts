/**
 * Where held copies live (Copies.ts): string keys, JSON values, a TTL each; what Redis offers (CONTRACT C2). Values
 * come back deeply frozen, the same object until rewritten (Copies.ts `entryDecoder` validates each once). A broken
 * store is a miss, never a failed request. The memory store keeps negative answers apart, so junk evicts only junk
 * (test/integration/rates/memory-bound.test.ts); a series takes about 3.7 times its JSON size in the heap.
 */
import { Clock, Context, Duration, Effect, Layer, Option, type Schema } from "effect"
import { recordCacheLookup } from "../../observability/metrics.ts"
import { makeBoundedLru } from "../../platform/boundedLru.ts"
import { Redis } from "effect/persistence"
import { deepFreeze } from "../../platform/deepFreeze.ts"
import { makeRedisLease } from "../../platform/redisLease.ts"
import { whenStoreFails } from "../redisDown.ts"

/** A lease asked for: the store's answer, or none in time (a slow store is not a lease held elsewhere). */
export type Claim = "taken" | "held" | "no answer"

interface SetOptions {
  /** A negative answer (no such coin, no market): kept in the small store of its own. */
  readonly negative?: boolean
}

export interface CopyWrite {
  readonly key: string
  readonly value: Schema.Json
  readonly timeToLive: Duration.Duration
  readonly negative: boolean
}

export interface CopyStoreShape {
  readonly get: (key: string) => Effect.Effect<Option.Option<Schema.Json>>
  readonly set: (key: string, value: Schema.Json, timeToLive: Duration.Duration, options?: SetOptions) => Effect.Effect<void>
  /** True when other instances read what is written here (Redis): worth writing what only they need. */
  readonly shared: boolean
  /** Shared stores: takes `key` for `holder` (or finds it theirs already) for `timeToLive` unless another holds it. */
  readonly claim?: ((key: string, holder: string, timeToLive: Duration.Duration) => Effect.Effect<Claim>) | undefined
  /** Gives `key` back before its time (the load it guarded ended), if `holder` still holds it. */
  readonly release?: ((key: string, holder: string) => Effect.Effect<void>) | undefined
  /** Several keys in one operation (Redis: one MGET), in their order; without it, readers `get` each. */
  readonly getMany?: ((keys: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Option.Option<Schema.Json>>>) | undefined
  /** Several `set`s in one operation; without it, writers `set` each. */
  readonly setMany?: ((writes: ReadonlyArray<CopyWrite>) => Effect.Effect<void>) | undefined
}

export interface MemoryStoreOptions {
  /** Most JSON bytes of data entries (default 16 MiB; the service passes COINGECKO_CACHE_MAX_MB). */
  readonly maxBytes?: number
  readonly maxEntries?: number
  readonly negativeEntries?: number
}
interface MemoryStoreSize {
  readonly data: { readonly entries: number; readonly bytes: number }
  readonly negative: { readonly entries: number; readonly bytes: number }
}
export interface MemoryStore extends CopyStoreShape {
  readonly size: () => MemoryStoreSize
}

export class CopyStore extends Context.Service<CopyStore, CopyStoreShape>()("app/rates/CopyStore") {
  static readonly makeMemory = (options: MemoryStoreOptions = {}): MemoryStore => metered(makeMemoryStore(options))
  static readonly layerMemory = (options?: MemoryStoreOptions) => Layer.sync(CopyStore, () => CopyStore.makeMemory(options))

  /** Shared through Redis (REDIS_URL), keys under `prefix`; when Redis is slow or down, as redisDown.ts says. */
  static readonly layerRedis = (options?: { readonly prefix?: string }) =>
    Layer.effect(CopyStore, Effect.map(Effect.service(Redis.Redis), (redis) => metered(makeRedisStore(redis, options?.prefix ?? ""))))
}

const LEASE_POLL_MS = 250
const MOST_LEASES_HELD = 5 // a load renews its lease this many leases' time at most: one that hangs frees it

/**
 * One instance at a time runs `load` (fetch and store) for `key`, under the store's lease (`leaseMs` to live, renewed
 * while the load runs, released once the copy is stored); while another holds it, or when it stored one just before,
 * what `adopt` finds stored is taken instead (polled), and the lease is asked again (a failed holder's lapses). After
 * `alone` claims in a row the store did not answer (redisDown.ts), or two leases past the longest hold, `load` runs alone.
 */
export const underLease = <A, E>(
  store: CopyStoreShape,
  key: string,
  leaseMs: number,
  alone: number,
  adopt: Effect.Effect<A | undefined>,
  load: Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const lease = `${key}:loading`
    const holder = crypto.randomUUID()
    const claim = store.claim?.(lease, holder, Duration.millis(leaseMs)) ?? Effect.succeed<Claim>("taken")
    let claimed = yield* claim
    const giveUpAt = (yield* Clock.currentTimeMillis) + (MOST_LEASES_HELD + 2) * leaseMs
    for (let unanswered = 0; claimed !== "taken";) {
      // A claim not answered in time (a slow store, a busy process) may have taken the lease: asked again, it is found ours.
      unanswered = claimed === "no answer" ? unanswered + 1 : 0
      if ((yield* Clock.currentTimeMillis) >= giveUpAt || unanswered >= alone) break
      yield* Effect.sleep(Duration.millis(LEASE_POLL_MS))
      const adopted = yield* adopt
      if (adopted !== undefined) return adopted
      claimed = yield* claim
    }
    // Ours, the lease is renewed (claimed again: ours, it is extended) every third of its time while the load runs.
    const renewals = Effect.repeat(Effect.andThen(Effect.sleep(Duration.millis(leaseMs / 3)), claim), { times: 3 * (MOST_LEASES_HELD - 1) - 1 })
    const loaded = claimed === "taken" ? Effect.scoped(Effect.andThen(Effect.forkScoped(renewals), load)) : load
    // Released however the load ends, also when run without the lease (a late claim may have taken it).
    return yield* Effect.ensuring(Effect.flatMap(adopt, (stored) => stored !== undefined ? Effect.succeed(stored) : loaded), store.release?.(lease, holder) ?? Effect.void)
  })

/** Kind of entry for metrics, a closed set: `rates:v2:chart:bitcoin:usd` → `chart`. */
const kindOf = (key: string) => key.split(":")[2] ?? "other"
/** Kinds of the keys seen lately: the same few keys are read on every request. Bounded, as keys come from callers. */
const kinds = new Map<string, string>()
const KINDS_CAPACITY = 4_096
const kindFor = (key: string) => {
  let kind = kinds.get(key)
  if (kind === undefined) {
    kind = kindOf(key)
    if (kinds.size >= KINDS_CAPACITY) kinds.clear()
    kinds.set(key, kind)
  }
  return kind
}

/** `store` with its reads counted as cache hits or misses (metrics). */
const metered = <S extends CopyStoreShape & { readonly getMany: NonNullable<CopyStoreShape["getMany"]> }>(store: S): S => ({
  ...store,
  get: (key: string) =>
    Effect.map(store.get(key), (found) => {
      recordCacheLookup(kindFor(key), Option.isSome(found))
      return found
    }),
  getMany: (keys: ReadonlyArray<string>) =>
    Effect.map(store.getMany(keys), (found) => {
      for (let i = 0; i < keys.length; i++) recordCacheLookup(kindFor(keys[i]!), Option.isSome(found[i]!))
      return found
    })
})

const frozenCopy = (text: string): Schema.Json => deepFreeze(JSON.parse(text) as Schema.Json)

/** One value of the memory tier, until `expiresAt` (epoch ms), counted as `bytes` in its bound. */
export interface Expiring<V> {
  readonly value: V
  readonly expiresAt: number
  readonly bytes: number
}

/** The memory tier of every holder: a bounded LRU (platform/boundedLru.ts); an expired entry reads as absent. */
export const makeExpiringLru = <V>(maxEntries: number, maxBytes: number) => {
  const lru = makeBoundedLru<Expiring<V>>({ maxEntries, maxBytes, bytesOf: (_, entry) => entry.bytes })
  return {
    get: (key: string, now: number): Expiring<V> | undefined => {
      const entry = lru.get(key)
      if (entry === undefined || entry.expiresAt > now) return entry
      lru.remove(key)
      return undefined
    },
    put: lru.put,
    remove: lru.remove,
    size: lru.size
  }
}

const makeMemoryStore = (options: MemoryStoreOptions) => {
  // As read from Redis: serialised on `set` (non-JSON fails here, not in production), parsed once, frozen.
  const data = makeExpiringLru<Schema.Json>(options.maxEntries ?? 50_000, options.maxBytes ?? 16 * 1024 * 1024)
  const negative = makeExpiringLru<Schema.Json>(options.negativeEntries ?? 2_000, Number.POSITIVE_INFINITY)
  const lookup = (key: string, now: number): Option.Option<Schema.Json> => {
    const entry = data.get(key, now) ?? negative.get(key, now)
    return entry === undefined ? Option.none() : Option.some(entry.value)
  }
  const put = (key: string, value: Schema.Json, timeToLive: Duration.Duration, isNegative: boolean, now: number) => {
    const ttl = Duration.toMillis(timeToLive)
    data.remove(key)
    negative.remove(key)
    if (!(ttl > 0)) return
    const text = JSON.stringify(value)
    const entry = { value: frozenCopy(text), expiresAt: now + ttl, bytes: text.length + key.length }
    ;(isNegative ? negative : data).put(key, entry)
  }
  return {
    get: (key: string) => Effect.map(Clock.currentTimeMillis, (now) => lookup(key, now)),
    getMany: (keys: ReadonlyArray<string>) => Effect.map(Clock.currentTimeMillis, (now) => keys.map((key) => lookup(key, now))),
    set: (key: string, value: Schema.Json, timeToLive: Duration.Duration, setOptions?: SetOptions) =>
      Effect.map(Clock.currentTimeMillis, (now) => put(key, value, timeToLive, setOptions?.negative === true, now)),
    setMany: (writes: ReadonlyArray<CopyWrite>) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        for (const write of writes) put(write.key, write.value, write.timeToLive, write.negative, now)
      }),
    shared: false,
    size: () => ({ data: data.size(), negative: negative.size() })
  }
}

/** Entries whose last read text is remembered by the Redis store, with the value parsed from it. */
const REDIS_PARSED_CAPACITY = 1_000
const makeRedisStore = (redis: Redis.Redis["Service"], prefix: string) => {
  const lease = makeRedisLease(redis)
  // Key → the text last read or written and its frozen parse: unchanged text comes back as the same object.
  const parsed = new Map<string, { readonly text: string; readonly value: Schema.Json }>()
  const remember = (key: string, text: string, value: Schema.Json) => {
    parsed.delete(key)
    parsed.set(key, { text, value })
    if (parsed.size > REDIS_PARSED_CAPACITY) {
      const oldest = parsed.keys().next()
      if (oldest.done !== true) parsed.delete(oldest.value)
    }
  }
  const parse = (key: string, text: string): Option.Option<Schema.Json> => {
    const known = parsed.get(key)
    if (known !== undefined && known.text === text) return Option.some(known.value)
    try {
      const value = frozenCopy(text)
      remember(key, text, value)
      return Option.some(value)
    } catch {
      parsed.delete(key)
      return Option.none() // not ours or corrupted: a miss, and the next write replaces it
    }
  }
  const found = (key: string, text: unknown): Option.Option<Schema.Json> => {
    if (typeof text !== "string") {
      parsed.delete(key)
      return Option.none()
    }
    return parse(key, text)
  }
  // Redis away: what this process last read or wrote of the key (its entry says whether it still serves).
  const lastSeen = (key: string) => Option.fromUndefinedOr(parsed.get(key)?.value)
  const set = (key: string, value: Schema.Json, timeToLive: Duration.Duration) => {
    const ttl = Math.ceil(Duration.toMillis(timeToLive))
    if (!(ttl > 0)) return Effect.void
    const text = JSON.stringify(value)
    // Kept here too, so that what this process fetched serves it while Redis is away.
    remember(key, text, frozenCopy(text))
    return whenStoreFails("SET", Effect.asVoid(redis.send("SET", `${prefix}${key}`, text, "PX", String(ttl))), () => undefined)
  }
  return {
    shared: true,
    get: (key: string) => whenStoreFails("GET", Effect.map(redis.send<string | null>("GET", `${prefix}${key}`), (text) => found(key, text)), () => lastSeen(key)),
    getMany: (keys: ReadonlyArray<string>) =>
      keys.length === 0 ? Effect.succeed([]) : whenStoreFails(
        "MGET",
        Effect.map(redis.send<ReadonlyArray<string | null>>("MGET", ...keys.map((key) => `${prefix}${key}`)), (texts) => keys.map((key, i) => found(key, texts[i]))),
        () => keys.map(lastSeen)
      ),
    set,
    setMany: (writes: ReadonlyArray<CopyWrite>) =>
      Effect.forEach(writes, (write) => set(write.key, write.value, write.timeToLive), { concurrency: "unbounded", discard: true }),
    // Asked again by a holder whose first claim was answered late, the lease it took is found its own.
    claim: (key: string, holder: string, timeToLive: Duration.Duration) =>
      whenStoreFails("lease", Effect.map(lease.hold(`${prefix}${key}`, holder, Math.ceil(Duration.toMillis(timeToLive))), (taken): Claim => taken ? "taken" : "held"), (): Claim => "no answer"),
    release: (key: string, holder: string) => whenStoreFails("lease release", lease.release(`${prefix}${key}`, holder), () => undefined)
  }
}

