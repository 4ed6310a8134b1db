/**
 * How often the latest prices are refreshed, from the month's pace and the demand seen (CONTRACT C4
 * "Over a month", "Live quotes"). A unit is one currency's prices, refreshed for every coin asked in it
 * with `/coins/markets` calls (k = ceil(coins / 250) credits). The pace is shared by callers, not by units:
 * one caller, one share (RatesDemand, latestPrices.ts), each caller's share spent on the currencies it asks, so a
 * unit's weight w is the callers' shares in it and, with R = 0.9 × the month's pace and W = Σ w over units,
 *
 *   interval(u) = max(COINGECKO_LATEST_TTL_S, k(u) × W / (R × w(u))),   at most a week
 *
 * Σ k / interval = R: every caller's own budget is 1/N of the pace; units asked by many callers pool theirs.
 *   Demo, the landing page (200 addresses all asking usd and eur): w = 100 each, W = 200, so
 *   2 / (0.9 × 0.2195 a minute) = 10.1 minutes for both; Basic, the same: 61 seconds.
 *   One address asking all 60 currencies adds 1 to W and 1/60 to usd: × 201 / 200.03, +0.5 % (Basic).
 *   In general a caller lengthens the others' intervals by (N + 1) / N, N the callers seen within the
 *   demand window: within a tenth from ten callers on, not below (two callers: each has half the pace).
 * The week's cap: a unit whose share buys less than a refresh a week gets the week, and those weekly
 * refreshes are taken off R before the rest is shared (never more than half of R), so the cap lends nobody's
 * budget unseen. On Demo the address asking all 60 currencies is such a case: its 58 currencies of its own
 * (1/60 of one share among 201) take 58 credits a week, 2.9 % of R: the landing page's +3 %. A unit nobody
 * asked within the window costs nothing (it is refreshed only when read) and gets the week.
 *
 * The tenth kept back pays for the daily points, the coin index and the currency list. The interval is the
 * price entries' lifetime when they are stored (latestPrices.ts), so an answer is repeated, unchanged,
 * until its prices are due; the month's ledger (credits/) is what holds every call to the pace.
 */
import { recordRefreshIntervals } from "../../observability/metrics.ts"
import { DAY_MS } from "../dailySeries.ts"

/** The demand as it stands: each currency's weight, and how many callers it comes from. */
export interface DemandWeights {
  /** Currency (lower case) → its weight, the callers' shares in it (see above). */
  readonly weights: ReadonlyMap<string, number>
  /** Callers seen within the window (each weighs 1 in all). */
  readonly callers: number
}

/** Coins one `/coins/markets` call takes. */
export const UNIT_SIZE = 250
/**
 * A currency's coins stay in its unit this long after they were last asked here, or three of its intervals
 * when that is longer: answers are repeated from memory until their prices are due, so a popular currency
 * may not reach the provider (and this tally) more often than once an interval. (Callers are counted at
 * every request, edge repeats included: latestPrices.ts RatesDemand.)
 */
const DEMAND_WINDOW_MS = 30 * 60_000
/** The share of the pace the refreshes of latest prices plan for. */
export const PRICES_SHARE = 0.9
/** The longest interval: a week (see above). */
export const MAX_INTERVAL_MS = 7 * DAY_MS
/** What capped units may take off the pace, at most. */
const CAPPED_SHARE = 0.5

export interface RefreshPacer {
  /** Notes that `ids` were asked in `currency` at `now`. */
  readonly note: (currency: string, ids: ReadonlyArray<string>, now: number) => void
  /** The coins of `currency` asked within the window, most recently asked first, one unit's worth. */
  readonly unit: (currency: string, now: number) => ReadonlyArray<string>
  /** Milliseconds between two refreshes of `currency`'s unit, for the demand seen until `now`. */
  readonly interval: (currency: string, now: number) => number
}

/** Bounds what a flood of currencies and coins can make this remember. */
const MAX_CURRENCIES = 1_000

interface Unit {
  readonly currency: string
  /** Calls one refresh takes. */
  readonly calls: number
  readonly weight: number
}

/**
 * Each unit's interval (ms): the rule above. Units whose share buys less than a refresh in `maxMs` are
 * capped, their cost taken off the rate first (fewest callers per call first); the rest share what is left.
 */
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
  /** The callers' weights per currency now (latestPrices.ts RatesDemand). */
  readonly demand: () => DemandWeights
}): RefreshPacer => {
  // currency → coin id → when last asked (a Map keeps insertion order: re-inserting moves it last).
  const coinsOf = new Map<string, Map<string, number>>()
  const lastAsked = new Map<string, number>()
  // Each currency's last interval, for its window; and the intervals computed last, reused for the same
  // instant and demand (a batch of 250 prices stored at once asks 250 times).
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

  const unit = (currency: string, now: number) => {
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
