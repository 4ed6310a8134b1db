/**
 * The live `RatesProvider`: CoinGecko behind a cache, single-flight and stale-if-error.
 *
 * One `historical` call runs in three steps, all within `requestBudgetMs` (CONTRACT C4 answers within
 * 10 s whatever the upstream does):
 *   1. currency check against `/simple/supported_vs_currencies` (cached a day);
 *   2. symbols → coins: the curated map, then the upstream's symbol lookup (cached a day, unknowns too);
 *   3. per coin, the daily series (fetched for a fixed range of 7/30/90/180/365 days and sliced; cached
 *      until the next daily point) and the latest price and changes (one batched `/coins/markets` call,
 *      cached a minute).
 * Each cached item also has a long-lived "last good" copy. When the upstream fails, that copy is served
 * and the answer says `stale: true`; only when no copy exists does the upstream's error reach the caller.
 *
 * A known coin that can be served neither fresh nor from a last good copy fails the whole call: a partial
 * answer would look complete to the caller.
 *
 * Usage: `import * as CoinGeckoRates from "./rates/CoinGeckoRates.ts"`, then provide `CoinGeckoRates.layer`
 * (needs an `HttpClient`, e.g. `NodeHttpClient.layerUndici`), or `CoinGeckoRates.layerRedis` (also needs
 * `Redis.Redis`) when several instances run.
 */
import { Clock, Duration, Effect, Layer, Option, Schema, type Scope } from "effect"
import type { HttpClient } from "effect/http"
import type { Redis } from "effect/persistence"
import type { ConfigInvalid, Env } from "../env.ts"
import {
  CoinGeckoClient,
  CoinGeckoError,
  layerUpstreamGuardsMemory,
  layerUpstreamGuardsRedis,
  type MarketRow,
  toRatesError
} from "./CoinGeckoClient.ts"
import { changesFromSeries, type DailyPoint, millisUntilNextDailyPoint, toDailySeries } from "./dailySeries.ts"
import { RatesCache } from "./RatesCache.ts"
import { RatesConfig } from "./RatesConfig.ts"
import {
  type RatesError,
  type RateSeries,
  RatesProvider,
  type RatesQuery,
  type RatesResult,
  RatesUpstreamError,
  UnsupportedCurrencyError
} from "./RatesProvider.ts"
import { makeSingleFlight } from "./SingleFlight.ts"
import { curatedCoinFor } from "./symbols.ts"

export const SOURCE = "coingecko"
export const ATTRIBUTION = "Data provided by CoinGecko"

// ---------------------------------------------------------------------------------------------------
// What we keep in the cache. Everything is JSON (Redis-ready) and validated when read back.

const Coin = Schema.Struct({ id: Schema.String, name: Schema.String })
type Coin = typeof Coin.Type

/** A symbol's resolution; null when the upstream knows no coin with that ticker. */
const Resolution = Schema.NullOr(Coin)

/** Latest price and % changes of one coin in one currency; null when the upstream lists no market for it. */
const Latest = Schema.NullOr(Schema.Struct({
  name: Schema.String,
  price: Schema.NullOr(Schema.Finite),
  change24h: Schema.NullOr(Schema.Finite),
  change7d: Schema.NullOr(Schema.Finite),
  change30d: Schema.NullOr(Schema.Finite)
}))
type Latest = typeof Latest.Type

/** Daily points; null when the coin id does not exist upstream (404). */
const Chart = Schema.NullOr(Schema.Array(Schema.Tuple([Schema.Finite, Schema.Finite])))

const Currencies = Schema.Array(Schema.String)

interface Entry<A> {
  readonly storedAt: number
  readonly value: A
}

/** Reads back one cached entry: `{ storedAt, value }`, or nothing if it is not what we wrote. */
type EntryDecoder<A> = (json: unknown) => Option.Option<Entry<A>>

/** Freezes a decoded entry in depth: it is shared by every request that reads the same cached object. */
const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const member of Object.values(value)) deepFreeze(member)
    Object.freeze(value)
  }
  return value
}

/**
 * Every read is validated, but once per cached object: the stores hand back the same frozen object
 * until the entry is rewritten (RatesCache), so the outcome is remembered by that object's identity.
 * Objects that are not frozen (another store) could change after the check, so they are decoded each time.
 * The decoded entry is frozen and stays the same object while the cached one does, which lets
 * `historical` recognise an unchanged answer.
 */
const entryOf = <A, I>(value: Schema.Codec<A, I>): EntryDecoder<A> => {
  const decode = Schema.decodeUnknownOption(Schema.Struct({ storedAt: Schema.Finite, value }))
  const decoded = new WeakMap<object, Option.Option<Entry<A>>>()
  return (json) => {
    if (typeof json !== "object" || json === null || !Object.isFrozen(json)) return decode(json)
    let entry = decoded.get(json)
    if (entry === undefined) {
      entry = Option.map(decode(json), deepFreeze)
      decoded.set(json, entry)
    }
    return entry
  }
}

const entries = {
  currencies: entryOf(Currencies),
  resolution: entryOf(Resolution),
  latest: entryOf(Latest),
  chart: entryOf(Chart)
}

/** A value and where it came from. */
interface Sourced<A> {
  readonly value: A
  /** When it was fetched from the upstream (epoch ms). */
  readonly storedAt: number
  /** True when it is the last good copy served because the upstream failed. */
  readonly stale: boolean
}

const keys = {
  currencies: "rates:cg:currencies",
  symbol: (symbol: string) => `rates:cg:symbol:${symbol}`,
  latest: (currency: string, id: string) => `rates:cg:latest:${currency}:${id}`,
  chart: (id: string, currency: string, days: number) => `rates:cg:chart:${id}:${currency}:${days}`,
  lastGood: (key: string) => `${key}:last-good`
}

const ONE_DAY = Duration.hours(24)
/**
 * Series are fetched for a few fixed ranges and sliced: 29 and 30 days share one upstream call and one
 * cache entry, and callers cannot multiply cache keys (or upstream calls) by varying `days`.
 */
const SERIES_RANGES = [7, 30, 90, 180, 365] as const
export const seriesRangeFor = (days: number): number => SERIES_RANGES.find((range) => range >= days) ?? days

/** A coin missing upstream may be listed later; ask again after an hour rather than on every request. */
const MISSING_COIN_TTL = Duration.hours(1)

const toLatest = (row: MarketRow): NonNullable<Latest> => ({
  name: row.name,
  price: row.current_price,
  change24h: row.price_change_percentage_24h_in_currency ?? row.price_change_percentage_24h ?? null,
  change7d: row.price_change_percentage_7d_in_currency ?? null,
  change30d: row.price_change_percentage_30d_in_currency ?? null
})

/** Of the coins sharing a ticker, the top-ranked one (an unranked coin loses to any ranked one). */
const topRanked = (rows: ReadonlyArray<MarketRow>, symbol: string): MarketRow | undefined => {
  let best: MarketRow | undefined
  for (const row of rows) {
    if (row.symbol.toLowerCase() !== symbol.toLowerCase()) continue
    const rank = row.market_cap_rank ?? Number.POSITIVE_INFINITY
    const bestRank = best?.market_cap_rank ?? Number.POSITIVE_INFINITY
    if (best === undefined || rank < bestRank) best = row
  }
  return best
}

/** `2026-11-22T10:00:00Z`: ISO 8601 without the milliseconds (toISOString always ends `.mmmZ` in this range). */
const isoSeconds = (epochMs: number) => {
  const iso = new Date(epochMs).toISOString()
  return iso.length === 24 ? `${iso.slice(0, 19)}Z` : iso.replace(/\.\d{3}Z$/, "Z")
}

/**
 * `points.slice(-count)`, by hand: on a frozen array (cached entries are frozen) `slice` takes V8's slow
 * path, about 40 times slower than this loop.
 */
const lastPoints = <A>(points: ReadonlyArray<A>, count: number): Array<A> => {
  const start = count > 0 ? Math.max(0, points.length - count) : Math.min(points.length, -count)
  const out: Array<A> = []
  for (let i = start; i < points.length; i++) out.push(points[i]!)
  return out
}

/**
 * Answers remembered per query: bounded, as queries come from callers, in number and in series points
 * (each remembered answer also keeps its encoded body alive in the handler, about 30 bytes a point).
 */
const RESULTS_CAPACITY = 512
const RESULTS_MAX_POINTS = 100_000

const sameDependencies = (a: ReadonlyArray<unknown>, b: ReadonlyArray<unknown>) => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** Freezes an answer (not its series' points, frozen with the cached entries they come from). */
const freezeResult = (result: RatesResult): RatesResult => {
  for (const rate of result.rates) {
    Object.freeze(rate.change)
    Object.freeze(rate.series)
    Object.freeze(rate)
  }
  Object.freeze(result.rates)
  Object.freeze(result.unknown)
  return Object.freeze(result)
}

// ---------------------------------------------------------------------------------------------------

const makeCoinGeckoRates: Effect.Effect<
  RatesProvider["Service"],
  never,
  CoinGeckoClient | RatesCache | RatesConfig | Scope.Scope
> = Effect.gen(function*() {
  const config = yield* RatesConfig
  const cache = yield* RatesCache
  const upstream = yield* CoinGeckoClient
  const flights = yield* makeSingleFlight
  const lastGoodTtl = Duration.hours(config.staleTtlHours)

  const read = <A>(entry: EntryDecoder<A>, key: string): Effect.Effect<Option.Option<Entry<A>>> =>
    Effect.map(cache.get(key), (found) => (Option.isSome(found) ? entry(found.value) : Option.none()))

  /** Writes the fresh copy and, unless told otherwise, the last good copy. */
  const write = (key: string, value: Schema.Json, storedAt: number, ttl: Duration.Duration, keepLastGood = true) =>
    Effect.andThen(
      cache.set(key, { storedAt, value }, ttl),
      keepLastGood ? cache.set(keys.lastGood(key), { storedAt, value }, lastGoodTtl) : Effect.void
    )

  /** Waits for shared upstream work, but not past this request's deadline. */
  const byDeadline = (deadline: number) => <A>(effect: Effect.Effect<A, CoinGeckoError>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      effect.pipe(Effect.timeoutOrElse({
        duration: Duration.millis(Math.max(0, deadline - now)),
        orElse: () =>
          Effect.fail(new CoinGeckoError({ kind: "transient", detail: `no answer within the ${config.requestBudgetMs} ms budget`, retryAfterSeconds: 0 }))
      })))

  const freshFrom = <A>({ storedAt, value }: Entry<A>): Sourced<A> => ({ value, storedAt, stale: false })

  /**
   * Fresh copy → else one shared upstream fetch → else (upstream failed) the last good copy.
   * A not-found answer is not an upstream failure and is never papered over with an old copy.
   * `fetch` must be lazy (built when run, e.g. `Effect.suspend`): on a hit it is never run.
   */
  const cachedOrFetch = <A extends Schema.Json>(options: {
    readonly key: string
    readonly entry: EntryDecoder<A>
    readonly fetch: Effect.Effect<A, CoinGeckoError>
    readonly ttl: (value: A, now: number) => Duration.Duration
    readonly deadline: number
  }): Effect.Effect<Sourced<A>, CoinGeckoError> =>
    Effect.flatMap(read(options.entry, options.key), (hit) =>
      Option.isSome(hit) ? Effect.succeed(freshFrom(hit.value)) : fillOrLastGood(options))

  /** The miss path of `cachedOrFetch`, built only on a miss. */
  const fillOrLastGood = <A extends Schema.Json>(options: {
    readonly key: string
    readonly entry: EntryDecoder<A>
    readonly fetch: Effect.Effect<A, CoinGeckoError>
    readonly ttl: (value: A, now: number) => Duration.Duration
    readonly deadline: number
  }): Effect.Effect<Sourced<A>, CoinGeckoError> => {
    const fill = Effect.gen(function*() {
      // Another flight may have filled it between our miss and this flight starting.
      const again = yield* read(options.entry, options.key)
      if (Option.isSome(again)) return freshFrom(again.value)
      const value = deepFreeze(yield* options.fetch)
      const storedAt = yield* Clock.currentTimeMillis
      yield* write(options.key, value, storedAt, options.ttl(value, storedAt), value !== null)
      return { value, storedAt, stale: false }
    })
    return flights.run(options.key, fill).pipe(
      byDeadline(options.deadline),
      Effect.catchIf((error) => error.kind !== "not-found", (error) =>
        Effect.flatMap(read(options.entry, keys.lastGood(options.key)), (copy) =>
          Option.match(copy, {
            onNone: () => Effect.fail(error),
            onSome: ({ storedAt, value }) => Effect.succeed<Sourced<A>>({ value, storedAt, stale: true })
          })))
    )
  }

  // -- 1. currency ----------------------------------------------------------------------------------

  /** Resolves to when the list it judged by expires; undefined when it could not judge or used an old copy. */
  const checkCurrency = (currency: string, deadline: number): Effect.Effect<number | undefined, UnsupportedCurrencyError> =>
    cachedOrFetch({
      key: keys.currencies,
      entry: entries.currencies,
      fetch: Effect.suspend(() => Effect.map(upstream.supportedCurrencies, (codes) => codes.map((code) => code.toLowerCase()))),
      ttl: () => ONE_DAY,
      deadline
    }).pipe(
      Effect.flatMap(({ value, storedAt, stale }) =>
        value.includes(currency)
          ? Effect.succeed(stale ? undefined : storedAt + Duration.toMillis(ONE_DAY))
          : Effect.fail(new UnsupportedCurrencyError({ currency }))),
      // Without the list we cannot judge the code; the data calls below will fail for a bad one, and an
      // outage of this one endpoint must not hide cached data.
      Effect.catchTag("CoinGeckoError", (error) =>
        Effect.as(Effect.logWarning("rates: currency list unavailable; not validating", error.message), undefined))
    )

  // -- 2. symbols → coins ---------------------------------------------------------------------------

  /** Looks up uncurated symbols in one upstream call; also keeps the rows as latest prices. */
  const lookUpSymbols = (symbols: ReadonlyArray<string>, currency: string): Effect.Effect<Map<string, Coin | null>, CoinGeckoError> =>
    Effect.gen(function*() {
      const rows = yield* upstream.marketsBySymbols(currency, symbols)
      const storedAt = yield* Clock.currentTimeMillis
      const found = new Map<string, Coin | null>()
      for (const symbol of symbols) {
        const row = topRanked(rows, symbol)
        const coin = row === undefined ? null : Object.freeze({ id: row.id, name: row.name })
        found.set(symbol, coin)
        yield* write(keys.symbol(symbol), coin, storedAt, ONE_DAY)
        if (row !== undefined) {
          yield* write(keys.latest(currency, row.id), toLatest(row), storedAt, Duration.seconds(config.latestTtlSeconds))
        }
      }
      return found
    })

  const resolve = (symbols: ReadonlyArray<string>, currency: string, deadline: number) =>
    Effect.gen(function*() {
      const coins = new Map<string, Coin | null>()
      let stale = false
      // When the first cached resolution used here expires (curated symbols never do).
      let freshUntil = Number.POSITIVE_INFINITY
      const toLookUp: Array<string> = []
      for (const symbol of symbols) {
        const curated = curatedCoinFor(symbol)
        if (curated !== undefined) {
          coins.set(symbol, curated)
          continue
        }
        const hit = yield* read(entries.resolution, keys.symbol(symbol))
        if (Option.isSome(hit)) {
          coins.set(symbol, hit.value.value)
          freshUntil = Math.min(freshUntil, hit.value.storedAt + Duration.toMillis(ONE_DAY))
        } else toLookUp.push(symbol)
      }
      if (toLookUp.length === 0) return { coins, stale, freshUntil }
      // Looked up now: stored after this instant, for a day.
      freshUntil = Math.min(freshUntil, (yield* Clock.currentTimeMillis) + Duration.toMillis(ONE_DAY))

      const batch = [...toLookUp].sort()
      const looked = yield* flights.run(`lookup:${currency}:${batch.join(",")}`, Effect.suspend(() => lookUpSymbols(batch, currency))).pipe(
        byDeadline(deadline),
        Effect.result
      )
      if (looked._tag === "Success") {
        for (const symbol of toLookUp) coins.set(symbol, looked.success.get(symbol) ?? null)
        return { coins, stale, freshUntil }
      }
      // Upstream failed: use old resolutions; a symbol we never resolved cannot be answered.
      for (const symbol of toLookUp) {
        const copy = yield* read(entries.resolution, keys.lastGood(keys.symbol(symbol)))
        if (Option.isNone(copy)) return yield* Effect.fail(looked.failure)
        coins.set(symbol, copy.value.value)
        stale = true
      }
      return { coins, stale, freshUntil }
    })

  // -- 3. data ----------------------------------------------------------------------------------------

  /** Latest prices for coins, one batched upstream call for the misses. Missing entries mean "unavailable". */
  const latestFor = (ids: ReadonlyArray<string>, currency: string, deadline: number) =>
    Effect.gen(function*() {
      const latest = new Map<string, Sourced<Latest>>()
      const misses: Array<string> = []
      for (const id of ids) {
        const hit = yield* read(entries.latest, keys.latest(currency, id))
        if (Option.isSome(hit)) latest.set(id, { ...hit.value, stale: false })
        else misses.push(id)
      }
      if (misses.length === 0) return { latest, failure: undefined }

      const batch = [...misses].sort()
      const fetched = yield* flights.run(
        `latest:${currency}:${batch.join(",")}`,
        Effect.gen(function*() {
          const rows = yield* upstream.marketsByIds(currency, batch)
          const storedAt = yield* Clock.currentTimeMillis
          const byId = new Map(rows.map((row) => [row.id, row] as const))
          const out = new Map<string, Sourced<Latest>>()
          for (const id of batch) {
            const row = byId.get(id)
            const value = row === undefined ? null : Object.freeze(toLatest(row))
            yield* write(keys.latest(currency, id), value, storedAt, Duration.seconds(config.latestTtlSeconds), value !== null)
            out.set(id, { value, storedAt, stale: false })
          }
          return out
        })
      ).pipe(byDeadline(deadline), Effect.result)

      if (fetched._tag === "Success") {
        for (const [id, value] of fetched.success) latest.set(id, value)
        return { latest, failure: undefined }
      }
      for (const id of misses) {
        const copy = yield* read(entries.latest, keys.lastGood(keys.latest(currency, id)))
        if (Option.isSome(copy)) latest.set(id, { ...copy.value, stale: true })
      }
      return { latest, failure: fetched.failure }
    })

  /** Daily closes for a range bucket; the caller keeps the last `days` of them. */
  const chartFor = (id: string, currency: string, days: number, deadline: number) => {
    const range = seriesRangeFor(days)
    return cachedOrFetch({
      key: keys.chart(id, currency, range),
      entry: entries.chart,
      fetch: Effect.suspend(() =>
        upstream.marketChart(id, currency, range).pipe(
          Effect.map((points): ReadonlyArray<DailyPoint> | null => toDailySeries(points, range)),
          Effect.catchIf((error) => error.kind === "not-found", () => Effect.succeed(null))
        )
      ),
      // Past points never change: keep them until the next daily point is published.
      ttl: (value, now) => value === null ? MISSING_COIN_TTL : Duration.millis(millisUntilNextDailyPoint(now)),
      deadline
    })
  }

  // ---------------------------------------------------------------------------------------------------

  /** The last answer per query with what it was made of (see `historical`), oldest first. */
  const results = new Map<string, {
    readonly dependencies: ReadonlyArray<unknown>
    readonly result: RatesResult
    readonly points: number
    /** Until when (epoch ms) every cached value behind the answer stays fresh; 0 when one is an old copy. */
    freshUntil: number
  }>()
  let rememberedPoints = 0
  const forget = (key: string) => {
    const known = results.get(key)
    if (known === undefined) return
    results.delete(key)
    rememberedPoints -= known.points
  }
  const remember = (key: string, dependencies: ReadonlyArray<unknown>, result: RatesResult, freshUntil: number) => {
    forget(key)
    let points = 0
    for (const rate of result.rates) points += rate.series.length
    if (points > RESULTS_MAX_POINTS) return
    results.set(key, { dependencies, result, points, freshUntil })
    rememberedPoints += points
    while (results.size > RESULTS_CAPACITY || rememberedPoints > RESULTS_MAX_POINTS) {
      const oldest = results.keys().next()
      if (oldest.done === true) break
      forget(oldest.value)
    }
  }

  const historical = (query: RatesQuery): Effect.Effect<RatesResult, RatesError> =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const deadline = startedAt + config.requestBudgetMs
      const currency = query.currency.toLowerCase()

      // The currency list is a nicety next to the data: it may not eat more than a third of the budget.
      const currenciesUntil = yield* checkCurrency(currency, Math.min(deadline, startedAt + config.requestBudgetMs / 3))
      const resolved = yield* resolve(query.symbols, currency, deadline)
      // Until when this very answer holds: the earliest expiry of what it is made of. Any old copy, or a
      // failed call that the next request would retry, makes it 0: such an answer is never reused by `peek`.
      let freshUntil = currenciesUntil === undefined || resolved.stale ? 0 : Math.min(currenciesUntil, resolved.freshUntil)

      // Distinct coin ids, first occurrence first (at most 50 symbols: a linear scan beats a Set here).
      const ids: Array<string> = []
      for (const coin of resolved.coins.values()) if (coin !== null && !ids.includes(coin.id)) ids.push(coin.id)
      const [latest, charts] = yield* Effect.all([
        latestFor(ids, currency, deadline),
        Effect.forEach(ids, (id) => Effect.result(chartFor(id, currency, query.days, deadline)), { concurrency: "unbounded" })
      ], { concurrency: 2 })
      const chartById = new Map(ids.map((id, i) => [id, charts[i]!] as const))

      let stale = resolved.stale
      let asOf = Number.POSITIVE_INFINITY
      // Each rate with the whole cached series; cut to `days` points only when a new answer is built.
      const rates: Array<RateSeries> = []
      const unknown: Array<string> = []
      // Everything the answer is made of. Cached values are frozen and stay the same objects until
      // their entry is rewritten, so equal dependencies (by identity) mean an identical answer.
      const dependencies: Array<unknown> = [resolved.stale, latest.failure !== undefined]

      for (const symbol of query.symbols) {
        const coin = resolved.coins.get(symbol) ?? null
        const chart = coin === null ? undefined : chartById.get(coin.id)
        dependencies.push(symbol, coin, chart?._tag === "Success" ? chart.success.value : undefined)
        if (coin === null || chart === undefined) {
          unknown.push(symbol)
          continue
        }
        // Strict: every known coin is served (fresh or last good), or the request fails.
        if (chart._tag === "Failure") return yield* Effect.fail(chart.failure)
        const market = latest.latest.get(coin.id)
        const chartTtl = chart.success.value === null ? MISSING_COIN_TTL : Duration.millis(millisUntilNextDailyPoint(chart.success.storedAt))
        freshUntil = chart.success.stale || market === undefined || market.stale
          ? 0
          : Math.min(freshUntil, chart.success.storedAt + Duration.toMillis(chartTtl), market.storedAt + config.latestTtlSeconds * 1000)
        if (chart.success.value === null) {
          unknown.push(symbol) // resolved, but the upstream has no such coin (404)
          continue
        }
        dependencies.push(chart.success.stale, market?.value, market?.storedAt, market?.stale)
        const lastClose = chart.success.value.at(-1) // the last of the whole series is the last of its tail
        let price: number
        let change: RateSeries["change"]
        let name = coin.name
        if (market !== undefined && market.value !== null && market.value.price !== null) {
          price = market.value.price
          change = { "24h": market.value.change24h, "7d": market.value.change7d, "30d": market.value.change30d }
          name = market.value.name || name
          asOf = Math.min(asOf, market.storedAt)
          stale ||= market.stale
        } else if (lastClose !== undefined) {
          // No latest price (upstream lists no market, or it failed and we hold no copy): the last close.
          price = lastClose[1]
          change = changesFromSeries(chart.success.value) // the whole fetched range: 30d needs more than days=7
          asOf = Math.min(asOf, lastClose[0])
          stale ||= latest.failure !== undefined
        } else {
          unknown.push(symbol) // a coin without any price data
          continue
        }
        stale ||= chart.success.stale
        rates.push({ symbol, id: coin.id, name, price, change, series: chart.success.value })
      }

      // An answer made of the same cached values as a previous one is that answer, the same object: the
      // handler then reuses its encoded body. Without any rate, asOf is the clock's: nothing to reuse.
      const reusable = Number.isFinite(asOf)
      const resultKey = reusable ? `${currency}|${query.days}|${query.symbols.join(",")}` : ""
      if (reusable) {
        const known = results.get(resultKey)
        if (known !== undefined && sameDependencies(known.dependencies, dependencies)) {
          known.freshUntil = freshUntil
          return known.result
        }
      }

      const result: RatesResult = {
        currency: currency.toUpperCase(),
        days: query.days,
        interval: "daily",
        asOf: isoSeconds(Number.isFinite(asOf) ? asOf : startedAt),
        source: SOURCE,
        stale,
        // The points themselves are frozen (cached entries are), so the answer shares them.
        rates: rates.map((rate) => ({ ...rate, series: lastPoints(rate.series, query.days) })),
        unknown,
        attribution: ATTRIBUTION
      }
      if (!reusable) return result
      remember(resultKey, dependencies, freezeResult(result), freshUntil)
      return result
    }).pipe(
      Effect.catchTag("CoinGeckoError", (error) =>
        // A not-found outside a chart call would mean a broken upstream contract: report it as such.
        Effect.fail(error.kind === "not-found" ? new RatesUpstreamError({ reason: error.message }) : toRatesError(error))),
      // No stack trace: capturing one costs an Error per request, and the span's name says where it is.
      Effect.withSpan("rates.historical", { attributes: { symbols: query.symbols.length, days: query.days } }, {
        captureStackTrace: false
      })
    )

  const clock = yield* Clock.clockWith(Effect.succeed)
  /** The remembered answer for this query while everything behind it is fresh: what `historical` would return now. */
  const peek = (query: RatesQuery): RatesResult | undefined => {
    const currency = query.currency.toLowerCase()
    const known = results.get(`${currency}|${query.days}|${query.symbols.join(",")}`)
    return known !== undefined && clock.currentTimeMillisUnsafe() < known.freshUntil ? known.result : undefined
  }

  return RatesProvider.of({ historical, peek })
})

// ---------------------------------------------------------------------------------------------------
// Layers

/** Everything injected: swap the cache (Redis), the budget and breaker stores, or the config. */
export const layerNoDeps: Layer.Layer<RatesProvider, never, CoinGeckoClient | RatesCache | RatesConfig> = Layer.effect(
  RatesProvider,
  makeCoinGeckoRates
)

const withMemoryStores = (config: Layer.Layer<RatesConfig, ConfigInvalid>) =>
  layerNoDeps.pipe(
    Layer.provide(CoinGeckoClient.layerNoDeps),
    Layer.provide(Layer.mergeAll(config, RatesCache.layerMemory(), layerUpstreamGuardsMemory))
  )

/** The production Layer for one instance: config from `process.env`, in-memory cache, budget and breaker. */
export const layer: Layer.Layer<RatesProvider, ConfigInvalid, HttpClient.HttpClient> = withMemoryStores(RatesConfig.layer)

/** As `layer`, with configuration from an explicit environment (tests). */
export const layerFrom = (env: Env): Layer.Layer<RatesProvider, ConfigInvalid, HttpClient.HttpClient> =>
  withMemoryStores(RatesConfig.layerFrom(env))

const withRedisStores = (config: Layer.Layer<RatesConfig, ConfigInvalid>, keyPrefix: string) =>
  layerNoDeps.pipe(
    Layer.provide(CoinGeckoClient.layerNoDeps),
    Layer.provide(Layer.mergeAll(
      config,
      RatesCache.layerRedis({ prefix: `${keyPrefix}rates-cache:` }),
      layerUpstreamGuardsRedis(keyPrefix)
    ))
  )

/**
 * For several instances (REDIS_URL set): the cache, the calls-per-minute budget and the circuit breaker
 * are shared through Redis: what one instance fetched serves the others, and all stay within one budget.
 * Single-flight stays per instance. Provide `Redis.Redis` (e.g. `NodeRedis.layer`) and an `HttpClient`.
 */
export const layerRedis: Layer.Layer<RatesProvider, ConfigInvalid, HttpClient.HttpClient | Redis.Redis> = withRedisStores(
  RatesConfig.layer,
  ""
)

/** As `layerRedis`, with configuration from an explicit environment and its Redis keys under `keyPrefix` (tests). */
export const layerRedisFrom = (
  env: Env,
  options?: { readonly keyPrefix?: string }
): Layer.Layer<RatesProvider, ConfigInvalid, HttpClient.HttpClient | Redis.Redis> =>
  withRedisStores(RatesConfig.layerFrom(env), options?.keyPrefix ?? "")
