/**
 * How often the latest prices are refreshed, from the month's pace and the demand seen (CONTRACT C4
 * "Over a month"). A unit is one currency's prices, refreshed for every coin asked in it with one
 * `/coins/markets` call (one credit, up to 250 coins); the units asked within the last half hour (three
 * intervals, when longer) share the pace:
 *
 *   interval = max(COINGECKO_LATEST_TTL_S, units / (0.9 × pace))
 *   Demo, the landing page (usd and eur): 2 / (0.9 × 0.2195 a minute) = 10.1 minutes
 *   Basic, the same: 2 / (0.9 × 2.195 a minute) = 61 seconds
 *
 * The tenth kept back pays for the daily points, the coin index and the currency list. The interval is
 * the price entries' lifetime when they are stored (latestPrices.ts), so an answer is repeated, unchanged,
 * until its prices are due; the month's ledger (credits/) is what holds every call to the pace.
 */
import { recordRefreshInterval } from "../../observability/metrics.ts"

/** Coins one `/coins/markets` call takes. */
export const UNIT_SIZE = 250
/**
 * A currency counts as asked for this long after its last request, or three intervals when that is
 * longer: answers are repeated from memory until their prices are due, so a popular currency may not
 * reach the provider (and this tally) more often than once an interval.
 */
const DEMAND_WINDOW_MS = 30 * 60_000
/** The share of the pace the refreshes of latest prices plan for. */
export const PRICES_SHARE = 0.9

export interface RefreshPacer {
  /** Notes that `ids` were asked in `currency` at `now`. */
  readonly note: (currency: string, ids: ReadonlyArray<string>, now: number) => void
  /** The coins of `currency` asked within the window, most recently asked first, one unit's worth. */
  readonly unit: (currency: string, now: number) => ReadonlyArray<string>
  /** Milliseconds between two refreshes of a unit, for the demand seen until `now`. */
  readonly interval: (now: number) => number
}

/** Bounds what a flood of currencies and coins can make this remember. */
const MAX_CURRENCIES = 1_000

export const makeRefreshPacer = (options: { readonly minIntervalMs: number; readonly creditsPerMs: number }): RefreshPacer => {
  // currency → coin id → when last asked (a Map keeps insertion order: re-inserting moves it last).
  const demand = new Map<string, Map<string, number>>()
  const lastAsked = new Map<string, number>()
  let intervalMs = options.minIntervalMs
  const window = () => Math.max(DEMAND_WINDOW_MS, 3 * intervalMs)

  const prune = (now: number) => {
    for (const [currency, at] of lastAsked) {
      if (now - at <= window()) continue
      lastAsked.delete(currency)
      demand.delete(currency)
    }
  }

  const note = (currency: string, ids: ReadonlyArray<string>, now: number) => {
    let coins = demand.get(currency)
    if (coins === undefined) {
      prune(now)
      if (demand.size >= MAX_CURRENCIES) return
      demand.set(currency, coins = new Map())
    }
    for (const id of ids) {
      coins.delete(id)
      coins.set(id, now)
    }
    // Coins no longer asked leave their unit; the oldest first.
    for (const [id, at] of coins) {
      if (now - at <= window() && coins.size <= UNIT_SIZE * 4) break
      coins.delete(id)
    }
    lastAsked.delete(currency)
    lastAsked.set(currency, now)
  }

  const unit = (currency: string, now: number) => {
    const coins = demand.get(currency)
    if (coins === undefined) return []
    const ids: Array<string> = []
    for (const [id, at] of [...coins].reverse()) {
      if (ids.length >= UNIT_SIZE || now - at > window()) break
      ids.push(id)
    }
    return ids
  }

  const interval = (now: number) => {
    prune(now)
    let units = 0
    for (const coins of demand.values()) units += Math.max(1, Math.ceil(coins.size / UNIT_SIZE))
    const paced = units / (PRICES_SHARE * options.creditsPerMs)
    intervalMs = Math.max(options.minIntervalMs, Math.ceil(paced))
    recordRefreshInterval(intervalMs / 1000)
    return intervalMs
  }

  return { note, unit, interval }
}
