/**
 * `LatestPrices` served by CoinGecko: a coin's latest price and % changes from `/coins/markets`, one call
 * for every cold coin of a request (and the rest of its currency's unit, for the same one credit:
 * refreshPacer.ts), held as copies (copies/) that live for their currency's refresh interval, the share
 * of the month's pace its callers have (RatesDemand, below), and refreshed behind the callers'
 * backs, one call per currency for every coin asked in it. During an outage the last good copies serve,
 * marked stale.
 */
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import { makeCopies } from "../copies/Copies.ts"
import type { CopyStore } from "../copies/CopyStore.ts"
import { freshFor, type Timing } from "../copies/entry.ts"
import { type Latest, LatestPrices, type Served } from "../ports.ts"
import type { Charge } from "../upstream.ts"
import { CoinGeckoClient, type MarketRow } from "./CoinGeckoClient.ts"
import { CoinGeckoConfig } from "./CoinGeckoConfig.ts"
import { MonthlyBudget } from "./credits/MonthlyBudget.ts"
import { type DemandWeights, makeRefreshPacer, UNIT_SIZE } from "./refreshPacer.ts"

export const ATTRIBUTION = "Data provided by CoinGecko"

/** As held (and shared through Redis): the port's `Latest`. */
const LatestSchema = Schema.NullOr(Schema.Struct({
  name: Schema.String,
  price: Schema.NullOr(Schema.Finite),
  change24h: Schema.NullOr(Schema.Finite),
  change7d: Schema.NullOr(Schema.Finite),
  change30d: Schema.NullOr(Schema.Finite)
}))

const latestKey = (currency: string, id: string) => `rates:v2:latest:${currency}:${id}`

interface PriceOf {
  readonly currency: string
  readonly id: string
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

  // Fresh for its unit's interval when stored, refreshed when asked for an attempt's time before it
  // ends (so the new copy lands before the old one expires), served one interval more while the refresh
  // runs or the pace holds it back (at most the wait for one credit); past that, a request waits for a
  // cold fetch, and during an outage gets the copy marked stale.
  const timing = (value: Latest, storedAt: number, { currency }: PriceOf): Timing => {
    if (value === null) return freshFor(Duration.seconds(config.latestTtlSeconds))
    const ttl = Duration.millis(pacer.interval(currency, storedAt))
    return { ttl, refreshAhead: Duration.min(Duration.divideUnsafe(ttl, 2), attemptTimeout), grace: ttl }
  }

  /** One call for `keys` (all of one currency), taking its unit along, so the unit's prices stay in step. */
  const fetch = (keys: ReadonlyArray<PriceOf>, charge: Charge) =>
    Effect.gen(function*() {
      const currency = keys[0]!.currency
      const now = yield* Clock.currentTimeMillis
      const asked = keys.map((key) => key.id)
      const batch = [...new Set([...asked, ...pacer.unit(currency, now)])].slice(0, Math.max(asked.length, UNIT_SIZE)).sort()
      const rows = yield* client.marketsByIds(currency, batch, charge)
      const byId = new Map(rows.map((row) => [row.id, row] as const))
      return batch.map((id): readonly [PriceOf, Latest] => {
        const row = byId.get(id)
        return [{ currency, id }, row === undefined ? null : toLatest(row)]
      })
    })

  const copies = yield* makeCopies<PriceOf, Latest>({
    name: "latest prices",
    source: "coingecko",
    keyOf: ({ currency, id }) => latestKey(currency, id),
    value: LatestSchema,
    timing,
    isNegative: (value) => value === null,
    fetch,
    batched: true,
    lastGoodMs: config.staleTtlHours * 3_600_000,
    retryMs: config.auxiliaryRetryMs,
    // A currency's coins are refreshed together, one call.
    refreshGroup: {
      of: ({ currency }) => `latest-unit:${currency}`,
      keys: ({ currency }, now) => pacer.unit(currency, now).map((id) => ({ currency, id }))
    }
  })

  return LatestPrices.of({
    source: "coingecko",
    attribution: ATTRIBUTION,
    latest: (ids, currency, { charge, deadline }) =>
      Effect.gen(function*() {
        pacer.note(currency, ids, yield* Clock.currentTimeMillis)
        const keys = ids.map((id) => ({ currency, id }))
        const { failure, served } = yield* copies.getAll(keys, charge, deadline)
        const latest = new Map<string, Served<Latest>>()
        for (const key of keys) {
          const found = served.get(key)
          if (found !== undefined) latest.set(key.id, found)
        }
        return { latest, failure }
      })
  })
})

/**
 * Needs the client, the config, the month's budget and the callers' demand (together they set the refresh
 * intervals; the demand is the one the use case and the edge note: one instance per build) and the copies' store.
 */
export const layer: Layer.Layer<LatestPrices, never, CoinGeckoClient | CoinGeckoConfig | MonthlyBudget | RatesDemand | CopyStore> = Layer.effect(
  LatestPrices,
  makeLatestPrices
)

/**
 * RatesDemand: who asks which currency, and when: the demand the refresh of latest prices is shared by (CONTRACT C4
 * "Live quotes": what one caller asks cannot lengthen the refresh of what others ask;
 * refreshPacer.ts turns it into intervals). One caller, one share: each caller (a request's
 * `RatesQuery.caller`, `ip:<bucket>` or `client:<id>`; none: one shared `anonymous`) seen within the
 * window weighs 1, split evenly over the currencies it asked within the window, so a currency's weight is
 *
 *   w(currency) = Σ over the callers asking it of 1 / (currencies that caller asked)
 *
 * and asking more currencies spreads one's own share thinner, never takes more of it.
 *
 * Every request counts once, where it is answered: a repeat the edge sends from RatesAnswerMemo is noted by
 * the rates ready answer (handlers.ts), any other by the use case (historicalRates.ts). So both must see
 * ONE instance: provide `RatesDemand.layer` within the server's one build, as `RatesAnswerMemo.layer` is
 * (Layers are memoised per build: the same `layer` value provided in several places is one instance).
 *
 * `note` runs on the edge's hot path: a pair noted less than a second ago is left as it is (two Map
 * reads). Memory is bounded: callers, currencies per caller and pairs in all; beyond, the callers noted
 * least recently are forgotten first. The weights are summed when asked, at most once a second unless
 * something new was noted (the pacer asks when it stores prices, a few times an interval).
 */

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
