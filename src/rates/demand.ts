/**
 * Who asks which currency, and when: the demand the refresh of latest prices is shared by (CONTRACT C4
 * "Live quotes": what one caller asks cannot lengthen the refresh of what others ask;
 * coingecko/refreshPacer.ts turns it into intervals). One caller, one share: each caller (a request's
 * `RatesQuery.caller`, `ip:<bucket>` or `client:<id>`; none: one shared `anonymous`) seen within the
 * window weighs 1, split evenly over the currencies it asked within the window, so a currency's weight is
 *
 *   w(currency) = Σ over the callers asking it of 1 / (currencies that caller asked)
 *
 * and asking more currencies spreads one's own share thinner, never takes more of it.
 *
 * Every request counts once, where it is answered: a repeat the edge sends from RatesAnswerMemo is noted by
 * the rates ready answer (readyAnswer.ts), any other by the use case (historicalRates.ts). So both must see
 * ONE instance: provide `RatesDemand.layer` within the server's one build, as `RatesAnswerMemo.layer` is
 * (Layers are memoised per build: the same `layer` value provided in several places is one instance).
 *
 * `note` runs on the edge's hot path: a pair noted less than a second ago is left as it is (two Map
 * reads). Memory is bounded: callers, currencies per caller and pairs in all; beyond, the callers noted
 * least recently are forgotten first. The weights are summed when asked, at most once a second unless
 * something new was noted (the pacer asks when it stores prices, a few times an interval).
 */
import { Clock, Context, Effect, Layer } from "effect"

/** The demand as it stands: each currency's weight, and how many callers it comes from. */
export interface DemandWeights {
  /** Currency (lower case) → its weight, the callers' shares in it (see above). */
  readonly weights: ReadonlyMap<string, number>
  /** Callers seen within the window (each weighs 1 in all). */
  readonly callers: number
}

export interface RatesDemandShape {
  /** Notes that `caller` (undefined: anonymous) asks `currency` (lower case) now. Synchronous and cheap. */
  readonly note: (caller: string | undefined, currency: string) => void
  /** The weights of the callers seen within the window, now. */
  readonly weights: () => DemandWeights
  /** Callers and (caller, currency) pairs held (tests, metrics). */
  readonly size: () => { readonly callers: number; readonly pairs: number }
}

export interface RatesDemandOptions {
  /** How long a caller's request counts (default 30 minutes). */
  readonly windowMs?: number
  /** Most callers held (default 100,000). */
  readonly maxCallers?: number
  /** Most currencies held per caller, its latest (default 64: every currency CoinGecko quotes, about 60). */
  readonly maxCurrenciesPerCaller?: number
  /** Most (caller, currency) pairs held in all (default 200,000). */
  readonly maxPairs?: number
}

/** A caller's currencies and when each was last noted, in small parallel arrays (cheaper than a Map per caller). */
interface Caller {
  readonly currencies: Array<string>
  readonly at: Array<number>
  lastAt: number
}

const ANONYMOUS = "anonymous"
/** A pair noted this recently is not noted again: the hot path stays two Map reads. */
const NOTE_EVERY_MS = 1_000
/** Weights summed this recently are reused unless something new was noted. */
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

  /** Drops the callers last noted before the window, and the oldest beyond the bounds. */
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
        // Its least recently noted currency goes.
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
    Layer.effect(
      RatesDemand,
      Clock.clockWith((clock) => Effect.sync(() => makeRatesDemand(() => clock.currentTimeMillisUnsafe(), options)))
    )

  /** Half an hour's callers, at most 100,000. Provide it once (see above). */
  static readonly layer: Layer.Layer<RatesDemand> = RatesDemand.layerWith({})
}
