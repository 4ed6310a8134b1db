/**
 * CoinGecko's monthly credits, spent at the month's even pace (monthlyCredits.ts has the rule and its
 * arithmetic). The ledger lives in a DurableCell (a file under DATA_DIR, Redis or PostgreSQL): a restart
 * or a second instance adds no credit. It is kept on the store's clock, so an instance whose own clock
 * runs ahead moves it no further than the others; a stored value out of its bounds is repaired (logged).
 *
 * Each call takes a credit of its kind first (budget.ts, asked by CoinGeckoClient.ts): "lists" for the
 * start-up and daily lists, "cold" when a request waits for it, "refresh" when nobody does. No credit:
 * the call is not made, and the caller gets `rate-limited` with the seconds until one comes back (the
 * request: a held copy, the second source, or 503).
 *
 * Fail closed on credits, open on answers: when the store fails, this process spends from a ledger of
 * its own that starts empty (never a fresh reserve: not on a restart, not for a replaced worker) and
 * fills at its share of the pace, the month's pace divided by the workers it knows of (WEB_CONCURRENCY);
 * what it spent meanwhile is added to the shared ledger when the store answers again. Held copies and the
 * second source serve meanwhile.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { DurableCell, type DurableCellShape } from "../../../platform/durableCell/DurableCell.ts"
import { makeMemoryCell } from "../../../platform/durableCell/memory.ts"
import { recordCredits } from "../../../observability/metrics.ts"
import { failWithFor, type SourceError } from "../../upstream.ts"
import { CoinGeckoConfig } from "../CoinGeckoConfig.ts"
import {
  type CreditKind,
  type CreditPlan,
  type CreditState,
  emptyState,
  initialState,
  parseState,
  planFor,
  repairState,
  settle,
  take
} from "./monthlyCredits.ts"

export interface CreditSnapshot {
  readonly plan: CreditPlan
  readonly state: CreditState
}

export class MonthlyBudget extends Context.Service<MonthlyBudget, {
  readonly plan: CreditPlan
  /** Takes one credit for a call of `kind`, or fails `rate-limited` with the wait until one comes back. */
  readonly spend: (kind: CreditKind) => Effect.Effect<void, SourceError>
  /** The ledger now (read, not changed). */
  readonly snapshot: Effect.Effect<CreditSnapshot>
}>()("app/rates/MonthlyBudget") {
  /** The plan's credits (COINGECKO_CALLS_PER_MONTH) in the DurableCell given. */
  static readonly layer: Layer.Layer<MonthlyBudget, never, DurableCell | CoinGeckoConfig> = Layer.effect(
    MonthlyBudget,
    Effect.gen(function*() {
      const config = yield* CoinGeckoConfig
      return yield* makeMonthlyBudget(planFor(config.callsPerMonth, config.listsPerLoad), yield* DurableCell, { workers: config.workers })
    })
  )

  /** In memory, with `perMonth` credits (tests; what a restart keeps is a test of `layer`). */
  static readonly layerMemory = (perMonth: number): Layer.Layer<MonthlyBudget> =>
    Layer.effect(MonthlyBudget, makeMonthlyBudget(planFor(perMonth), makeMemoryCell()))
}

/** The cell's name: one ledger per upstream key (REDIS_KEY_PREFIX and the store keep deployments apart). */
export const LEDGER = "coingecko-credits"
const MAX_RACES = 16

/** The plan one of `workers` processes spends alone: its share of every part and of the pace. */
const shareOf = (plan: CreditPlan, workers: number): CreditPlan => {
  const part = (values: Readonly<Record<CreditKind, number>>) =>
    ({ lists: values.lists / workers, cold: values.cold / workers, refresh: values.refresh / workers })
  return { perMonth: plan.perMonth / workers, ratePerMs: plan.ratePerMs / workers, capacity: part(plan.capacity), rate: part(plan.rate) }
}

/** `state` less what was spent without it, each part down to zero at most, the month's count up by as much. */
const withOwed = (state: CreditState, owed: Readonly<Record<CreditKind, number>>): CreditState => ({
  ...state,
  lists: Math.max(0, state.lists - owed.lists),
  cold: Math.max(0, state.cold - owed.cold),
  refresh: Math.max(0, state.refresh - owed.refresh),
  spent: state.spent + owed.lists + owed.cold + owed.refresh
})

export const makeMonthlyBudget = (plan: CreditPlan, cell: DurableCellShape, options: { readonly workers: number } = { workers: 1 }) =>
  Effect.gen(function*() {
    const ownPlan = shareOf(plan, Math.max(1, options.workers))
    // This process's own ledger while the store is away, and what it spent from it.
    let local: CreditState | undefined
    let owed: Record<CreditKind, number> = { lists: 0, cold: 0, refresh: 0 }
    let lastSpent = 0
    let storeDown = false
    // One log line per hold: when the pace first refuses a refresh, then not until one is granted again.
    let refreshHeld = false

    const publish = (state: CreditState) => recordCredits("coingecko", state.spent, Math.max(0, plan.perMonth - state.spent))

    /** Read, repair, settle what is owed, take, compare-and-set; again when another instance wrote in between. */
    const takeShared = (kind: CreditKind) =>
      Effect.gen(function*() {
        for (let race = 0; race < MAX_RACES; race++) {
          const now = yield* cell.now
          const text = yield* cell.get(LEDGER)
          const stored = parseState(text)
          let base: CreditState | undefined
          if (text !== undefined && stored === undefined) {
            // A value that is not a ledger (corrupted, another release's) starts empty, not full.
            yield* Effect.logWarning("rates: the credit ledger holds no ledger; starting it empty")
            base = emptyState(now)
          } else if (stored !== undefined) {
            const { repaired, state } = repairState(stored, plan, now)
            if (repaired.length > 0) yield* Effect.logWarning(`rates: the credit ledger was out of its bounds, repaired: ${repaired.join("; ")}`)
            base = state
          }
          const owing = owed.lists + owed.cold + owed.refresh > 0
          if (owing) base = withOwed(base === undefined ? initialState(plan, now) : settle(base, plan, now), owed)
          const taken = take(base, plan, kind, now)
          if (yield* cell.compareAndSet(LEDGER, text, JSON.stringify(taken.state))) {
            if (owing) {
              yield* Effect.logInfo(`rates: ${owed.lists + owed.cold + owed.refresh} credits spent while the ledger was away are now in it`)
              owed = { lists: 0, cold: 0, refresh: 0 }
            }
            return taken
          }
        }
        // Contention this high means instances spend faster than the pace anyway: refuse this one.
        return { state: emptyState(yield* Clock.currentTimeMillis, lastSpent), granted: false, waitMs: 1_000 }
      })

    /** From this process's own ledger: empty when the store went away, filling at its share of the pace. */
    const takeLocal = (kind: CreditKind, now: number) => {
      const taken = take(local ?? emptyState(now, lastSpent), ownPlan, kind, now)
      local = taken.state
      if (taken.granted) owed = { ...owed, [kind]: owed[kind] + 1 }
      return taken
    }

    const spend = (kind: CreditKind): Effect.Effect<void, SourceError> =>
      Effect.gen(function*() {
        const shared = yield* Effect.result(takeShared(kind))
        let taken
        if (shared._tag === "Success") {
          if (storeDown) yield* Effect.logInfo(`rates: the credit ledger (${cell.store}) answers again`)
          storeDown = false
          local = undefined
          taken = shared.success
          lastSpent = taken.state.spent
        } else {
          if (!storeDown) {
            yield* Effect.logWarning(
              `rates: the credit ledger (${cell.store}) failed; spending this process's share of the pace (1/${options.workers}) meanwhile`,
              shared.failure.message
            )
          }
          storeDown = true
          taken = takeLocal(kind, yield* Clock.currentTimeMillis)
        }
        publish(taken.state)
        const seconds = Math.max(1, Math.ceil(taken.waitMs / 1000))
        if (taken.granted) {
          if (kind === "refresh") refreshHeld = false
          return
        }
        if (kind === "refresh" && !refreshHeld) {
          refreshHeld = true
          yield* Effect.logInfo("rates: the month's pace holds a refresh back", {
            nextCreditInSeconds: seconds,
            creditsSpentThisMonth: taken.state.spent,
            perMonth: plan.perMonth
          })
        }
        return yield* failWithFor("coingecko")("rate-limited", `the month's ${kind} credits are spent for now (${plan.perMonth} a month, at an even pace)`, seconds)
      })

    const snapshot = Effect.gen(function*() {
      const now = yield* Effect.catch(cell.now, () => Clock.currentTimeMillis)
      const stored = parseState(yield* Effect.orElseSucceed(cell.get(LEDGER), () => undefined))
      if (stored === undefined) return { plan, state: local ?? initialState(plan, now) }
      return { plan, state: settle(repairState(stored, plan, now).state, plan, now) }
    })

    return MonthlyBudget.of({ plan, spend, snapshot })
  })
