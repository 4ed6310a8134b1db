/**
 * How long a latest price is held, in one file: who asks which currency (RatesDemand), how often each
 * currency's prices may be refreshed within the month's pace (the refresh pacer), and `LatestPrices`
 * served by CoinGecko from copies (copies/); during an outage the last good copies serve, marked stale.
 */
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import { recordRefreshIntervals } from "../../observability/metrics.ts"
import { clockedLayer } from "../../platform/clockedLayer.ts"
import { makeCopies } from "../copies/Copies.ts"
import type { CopyStore } from "../copies/CopyStore.ts"
import { freshFor, type Timing } from "../copies/entry.ts"
import { DAY_MS } from "../dailySeries.ts"
import { type Latest, LatestPrices, type Served } from "../ports.ts"
import { CoinGeckoClient, type MarketRow } from "./CoinGeckoClient.ts"
import { CoinGeckoConfig } from "./CoinGeckoConfig.ts"
import { MonthlyBudget } from "./credits/MonthlyBudget.ts"

/**
 * RatesDemand: who asks which currency (CONTRACT C4 "Live quotes": one caller's asks cannot lengthen the
 * refresh of others'). Each caller seen within the window (`RatesQuery.caller`, else `anonymous`) weighs 1,
 * split evenly over its currencies. A request is noted once, where answered (handlers.ts for an edge
 * repeat, else the use case): provide `RatesDemand.layer` once per build.
 */
export interface RatesDemandShape {
  /** Notes that `caller` (undefined: anonymous) asks `currency` (lower case) now. Synchronous and cheap. */
  readonly note: (caller: string | undefined, currency: string) => void
  readonly weights: () => DemandWeights
  /** Callers and (caller, currency) pairs held (tests, metrics). */
  readonly size: () => { readonly callers: number; readonly pairs: number }
}

/** How long a caller counts (30 minutes); most callers (100,000), currencies per caller (64: all CoinGecko quotes), pairs (200,000). */
export interface RatesDemandOptions {
  readonly windowMs?: number
  readonly maxCallers?: number
  readonly maxCurrenciesPerCaller?: number
  readonly maxPairs?: number
}

/** A caller's currencies and when each was last noted, in small parallel arrays (cheaper than a Map per caller). */
interface Caller {
  readonly currencies: Array<string>
  readonly at: Array<number>
  lastAt: number
}

const ANONYMOUS = "anonymous"
/** A pair noted this recently is not noted again; weights summed this recently are reused unless something new was noted. */
const NOTE_EVERY_MS = 1_000
const SUM_EVERY_MS = 1_000

/** The demand, telling time by `now` (the Clock's `currentTimeMillisUnsafe`). */
export const makeRatesDemand = (now: () => number, options: RatesDemandOptions = {}): RatesDemandShape => {
  const windowMs = options.windowMs ?? 30 * 60_000
  const maxCallers = options.maxCallers ?? 100_000
  const maxPerCaller = options.maxCurrenciesPerCaller ?? 64
  const maxPairs = options.maxPairs ?? 200_000
  // Insertion order is the order of last (slow-path) notes: the first entries are the oldest.
  const callers = new Map<string, Caller>()
  let pairs = 0
  let summed: { readonly at: number; readonly weights: DemandWeights } | undefined
  let changed = true
  const forget = (key: string, caller: Caller) => {
    callers.delete(key)
    pairs -= caller.currencies.length
  }
  const prune = (at: number) => {
    for (const [key, caller] of callers) {
      if (caller.lastAt >= at - windowMs && callers.size <= maxCallers && pairs <= maxPairs) break
      forget(key, caller)
      changed = true
    }
  }

  const note = (who: string | undefined, currency: string) => {
    const key = who ?? ANONYMOUS
    const at = now()
    let caller = callers.get(key)
    const index = caller === undefined ? -1 : caller.currencies.indexOf(currency)
    if (caller !== undefined && index !== -1 && at - caller.at[index]! < NOTE_EVERY_MS) return
    if (caller === undefined) {
      caller = { currencies: [], at: [], lastAt: at }
      changed = true
    } else {
      callers.delete(key)
    }
    if (index === -1) {
      caller.currencies.push(currency)
      caller.at.push(at)
      pairs++
      changed = true
      if (caller.currencies.length > maxPerCaller) {
        const oldest = caller.at.indexOf(Math.min(...caller.at))
        caller.currencies.splice(oldest, 1)
        caller.at.splice(oldest, 1)
        pairs--
      }
    } else {
      caller.at[index] = at
    }
    caller.lastAt = at
    callers.set(key, caller)
    prune(at)
  }

  const sum = (at: number): DemandWeights => {
    prune(at)
    const weights = new Map<string, number>()
    const since = at - windowMs
    let active = 0
    for (const caller of callers.values()) {
      // Currencies no longer asked within the window leave the caller's split.
      for (let i = caller.at.length - 1; i >= 0; i--) {
        if (caller.at[i]! >= since) continue
        caller.currencies.splice(i, 1)
        caller.at.splice(i, 1)
        pairs--
      }
      const asked = caller.currencies.length
      if (asked === 0) continue
      active++
      for (const currency of caller.currencies) weights.set(currency, (weights.get(currency) ?? 0) + 1 / asked)
    }
    return { weights, callers: active }
  }
  return {
    note,
    weights: () => {
      const at = now()
      if (summed === undefined || changed || at - summed.at >= SUM_EVERY_MS || at < summed.at) {
        summed = { at, weights: sum(at) }
        changed = false
      }
      return summed.weights
    },
    size: () => ({ callers: callers.size, pairs })
  }
}

export class RatesDemand extends Context.Service<RatesDemand, RatesDemandShape>()("app/RatesDemand") {
  /** A demand with these bounds, telling time by the Clock of the context it is built in (TestClock in tests). */
  static readonly layerWith = (options: RatesDemandOptions): Layer.Layer<RatesDemand> =>
    clockedLayer(RatesDemand, (now) => makeRatesDemand(now, options))

  static readonly layer: Layer.Layer<RatesDemand> = RatesDemand.layerWith({})
}

/**
 * The refresh pacer (CONTRACT C4 "Over a month", "Live quotes"). A unit is one currency's prices for every
 * coin asked in it (k = ceil(coins / 250) credits), weighted by its callers' shares w (RatesDemand); with
 * R = 0.9 × the month's pace and W = Σ w,
 *
 *   interval(u) = max(COINGECKO_LATEST_TTL_S, k(u) × W / (R × w(u))),   at most a week
 *
 * so Σ k / interval = R and each of N callers gets 1/N of the pace. A unit whose share buys less than a
 * refresh a week gets the week, its cost taken off R first (at most half of R); one nobody asked costs
 * nothing. The tenth kept back pays for daily points and lists; the ledger (credits/) holds the pace.
 */
/** The demand as it stands: each currency's weight (its callers' shares), and the callers seen within the window. */
export interface DemandWeights {
  readonly weights: ReadonlyMap<string, number>
  readonly callers: number
}

/** Coins one `/coins/markets` call takes. */
const UNIT_SIZE = 250
/** A coin stays in its currency's unit this long after last asked here, or three intervals (repeats are answered from memory). */
const DEMAND_WINDOW_MS = 30 * 60_000
/** The share of the pace latest prices plan for; the longest interval; what capped units may take off the pace. */
export const PRICES_SHARE = 0.9
export const MAX_INTERVAL_MS = 7 * DAY_MS
const CAPPED_SHARE = 0.5

/** Bounds what a flood of currencies and coins can make this remember. */
const MAX_CURRENCIES = 1_000

interface Unit {
  readonly currency: string
  readonly calls: number
  readonly weight: number
}

/** Each unit's interval (ms), the rule above; capped units' cost is taken off the rate first (fewest callers per call first). */
export const unitIntervals = (
  units: ReadonlyArray<Unit>,
  options: { readonly minIntervalMs: number; readonly ratePerMs: number; readonly maxMs?: number }
): Map<string, number> => {
  const maxMs = options.maxMs ?? MAX_INTERVAL_MS
  const intervals = new Map<string, number>()
  let rate = options.ratePerMs
  let weight = 0
  for (const unit of units) weight += unit.weight
  const floor = options.ratePerMs * (1 - CAPPED_SHARE)
  for (const unit of [...units].sort((a, b) => a.weight / a.calls - b.weight / b.calls)) {
    const paced = unit.weight > 0 ? (unit.calls * weight) / (rate * unit.weight) : Infinity
    if (paced >= maxMs) {
      intervals.set(unit.currency, maxMs)
      if (unit.weight > 0 && rate - unit.calls / maxMs >= floor) {
        rate -= unit.calls / maxMs
        weight -= unit.weight
      }
      continue
    }
    intervals.set(unit.currency, Math.max(options.minIntervalMs, Math.ceil(paced)))
  }
  return intervals
}

export const makeRefreshPacer = (options: {
  readonly minIntervalMs: number
  readonly creditsPerMs: number
  /** The callers' weights per currency now (RatesDemand, above). */
  readonly demand: () => DemandWeights
}) => {
  // currency → coin id → when last asked (a Map keeps insertion order: re-inserting moves it last).
  const coinsOf = new Map<string, Map<string, number>>()
  const lastAsked = new Map<string, number>()
  // Each currency's last interval (for its window); the last intervals, reused for the same instant and demand.
  const lastInterval = new Map<string, number>()
  let computed: { readonly at: number; readonly demand: DemandWeights; readonly intervals: Map<string, number> } | undefined
  const window = (currency: string) => Math.max(DEMAND_WINDOW_MS, 3 * (lastInterval.get(currency) ?? 0))

  const prune = (now: number) => {
    for (const [currency, at] of lastAsked) {
      if (now - at <= window(currency)) continue
      lastAsked.delete(currency)
      coinsOf.delete(currency)
      lastInterval.delete(currency)
      computed = undefined
    }
  }

  const note = (currency: string, ids: ReadonlyArray<string>, now: number) => {
    let coins = coinsOf.get(currency)
    if (coins === undefined) {
      prune(now)
      if (coinsOf.size >= MAX_CURRENCIES) return
      coinsOf.set(currency, coins = new Map())
    }
    const before = coins.size
    for (const id of ids) {
      coins.delete(id)
      coins.set(id, now)
    }
    // Coins no longer asked leave their unit; the oldest first.
    for (const [id, at] of coins) {
      if (now - at <= window(currency) && coins.size <= UNIT_SIZE * 4) break
      coins.delete(id)
    }
    if (coins.size !== before) computed = undefined
    lastAsked.delete(currency)
    lastAsked.set(currency, now)
  }

  /** The coins of `currency` asked within the window, most recently asked first, one unit's worth. */
  const unit = (currency: string, now: number): ReadonlyArray<string> => {
    const coins = coinsOf.get(currency)
    if (coins === undefined) return []
    const ids: Array<string> = []
    for (const [id, at] of [...coins].reverse()) {
      if (ids.length >= UNIT_SIZE || now - at > window(currency)) break
      ids.push(id)
    }
    return ids
  }

  const intervals = (now: number) => {
    const demand = options.demand()
    prune(now)
    if (computed !== undefined && computed.at === now && computed.demand === demand) return computed.intervals
    const units: Array<Unit> = []
    for (const [currency, coins] of coinsOf) {
      units.push({ currency, calls: Math.max(1, Math.ceil(coins.size / UNIT_SIZE)), weight: demand.weights.get(currency) ?? 0 })
    }
    const found = unitIntervals(units, { minIntervalMs: options.minIntervalMs, ratePerMs: PRICES_SHARE * options.creditsPerMs })
    // What most callers get (the most demanded unit's), and the longest any caller within the window gets.
    let top: Unit | undefined
    let longest = 0
    for (const unit of units) {
      const ms = found.get(unit.currency)!
      lastInterval.set(unit.currency, ms)
      if (unit.weight > 0) longest = Math.max(longest, ms)
      if (top === undefined || unit.weight > top.weight) top = unit
    }
    if (top !== undefined) recordRefreshIntervals(found.get(top.currency)! / 1000, longest / 1000)
    computed = { at: now, demand, intervals: found }
    return found
  }

  // Not a unit only when MAX_CURRENCIES are: the longest.
  const interval = (currency: string, now: number) => intervals(now).get(currency) ?? MAX_INTERVAL_MS

  return { note, unit, interval }
}

export const ATTRIBUTION = "Data provided by CoinGecko"

/** As held (and shared through Redis): the port's `Latest`. */
const LatestSchema = Schema.NullOr(Schema.Struct({
  name: Schema.String,
  price: Schema.NullOr(Schema.Finite),
  change24h: Schema.NullOr(Schema.Finite),
  change7d: Schema.NullOr(Schema.Finite),
  change30d: Schema.NullOr(Schema.Finite)
}))

// A price's copy is held under its store key, which names its currency and coin (ids hold no colon).
const LATEST = "rates:v2:latest:"
const latestKey = (currency: string, id: string) => `${LATEST}${currency}:${id}`
const priceOf = (key: string) => {
  const [currency = "", id = ""] = key.slice(LATEST.length).split(":")
  return { currency, id }
}

const toLatest = (row: MarketRow): NonNullable<Latest> => ({
  name: row.name,
  price: row.current_price,
  change24h: row.price_change_percentage_24h_in_currency ?? row.price_change_percentage_24h ?? null,
  change7d: row.price_change_percentage_7d_in_currency ?? null,
  change30d: row.price_change_percentage_30d_in_currency ?? null
})

const makeLatestPrices = Effect.gen(function*() {
  const config = yield* CoinGeckoConfig
  const client = yield* CoinGeckoClient
  const { plan } = yield* MonthlyBudget
  const demand = yield* RatesDemand
  const pacer = makeRefreshPacer({ minIntervalMs: config.latestTtlSeconds * 1000, creditsPerMs: plan.ratePerMs, demand: demand.weights })
  const attemptTimeout = Duration.millis(config.attemptTimeoutMs)

  // Fresh for its unit's interval, refreshed ahead, served one interval more; past that a request waits.
  const timing = (value: Latest, storedAt: number, key: string): Timing => {
    if (value === null) return freshFor(Duration.seconds(config.latestTtlSeconds))
    const ttl = Duration.millis(pacer.interval(priceOf(key).currency, storedAt))
    return { ttl, refreshAhead: Duration.min(Duration.divideUnsafe(ttl, 2), attemptTimeout), grace: ttl }
  }

  /** One call for `keys` (all of one currency), taking its unit along, so the unit's prices stay in step. */
  const fetch = (keys: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const { currency } = priceOf(keys[0]!)
      const now = yield* Clock.currentTimeMillis
      const asked = keys.map((key) => priceOf(key).id)
      const batch = [...new Set([...asked, ...pacer.unit(currency, now)])].slice(0, Math.max(asked.length, UNIT_SIZE)).sort()
      const rows = yield* client.marketsByIds(currency, batch)
      const byId = new Map(rows.map((row) => [row.id, row] as const))
      return batch.map((id): readonly [string, Latest] => {
        const row = byId.get(id)
        return [latestKey(currency, id), row === undefined ? null : toLatest(row)]
      })
    })
  const copies = yield* makeCopies<Latest>({
    name: "latest prices",
    source: "coingecko",
    value: LatestSchema,
    timing,
    fetch,
    onFailure: { lastGoodMs: config.staleTtlHours * 3_600_000, retryMs: config.auxiliaryRetryMs },
    fetchedTogether: {
      groupOf: (key) => `latest-unit:${priceOf(key).currency}`,
      keys: (key, now) => {
        const { currency } = priceOf(key)
        return pacer.unit(currency, now).map((id) => latestKey(currency, id))
      }
    }
  })
  return LatestPrices.of({
    source: "coingecko",
    attribution: ATTRIBUTION,
    latest: (ids, currency) =>
      Effect.gen(function*() {
        pacer.note(currency, ids, yield* Clock.currentTimeMillis)
        const keys = ids.map((id) => latestKey(currency, id))
        const { failure, served } = yield* copies.getAll(keys)
        const latest = new Map<string, Served<Latest>>()
        ids.forEach((id, i) => {
          const found = served.get(keys[i]!)
          if (found !== undefined) latest.set(id, found)
        })
        return { latest, failure }
      })
  })
})

export const layer: Layer.Layer<LatestPrices, never, CoinGeckoClient | CoinGeckoConfig | MonthlyBudget | RatesDemand | CopyStore> = Layer.effect(
  LatestPrices,
  makeLatestPrices
)
