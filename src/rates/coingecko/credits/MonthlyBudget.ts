/**
 * CoinGecko's monthly credits, spent at the month's even pace (monthlyCredits.ts has the rule and its
 * arithmetic). The ledger lives in a DurableCell (a file under DATA_DIR, Redis or PostgreSQL): a restart
 * or a second instance adds no credit. It is kept on the store's clock, so an instance whose own clock
 * runs ahead moves it no further than the others; a stored value out of its bounds is repaired (logged).
 *
 * Each call takes a credit of its kind first (budget.ts, asked by CoinGeckoClient.ts): "lists" for the
 * start-up and daily lists, "cold" when a request waits for it, "refresh" when nobody does. No credit:
 * the call is not made, and the caller gets `rate-limited` with the seconds until one comes back (the
 * request: a held copy, the second source, or 503). A credit is held while its call is in flight, so that
 * calls made together never spend more than there is, and given back when CoinGecko did not bill the call
 * (it answered otherwise than 200: CONTRACT C4 "Over a month", amended). Calls paid together (the rank
 * pages of the coin index) take their credits at once, all or none.
 *
 * A ledger an older build kept counted every attempt, refusals too: on its first read it is recovered
 * within the month's allowance (monthlyCredits.ts `recoverAttempts`), once, logged.
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
  giveBack,
  initialState,
  parseState,
  planFor,
  recoverAttempts,
  repairState,
  settle,
  spill,
  take,
  type Taken
} from "./monthlyCredits.ts"

export interface CreditSnapshot {
  readonly plan: CreditPlan
  readonly state: CreditState
}

/** Credits taken for calls about to be made: spent, unless given back. */
export interface HeldCredits {
  /** Gives back `count` of them (at most those not given back yet): their calls were not billed. Never fails. */
  readonly giveBack: (count: number) => Effect.Effect<void>
}

export class MonthlyBudget extends Context.Service<MonthlyBudget, {
  readonly plan: CreditPlan
  /**
   * Takes `count` credits (1 by default; at most the part's capacity) for calls of `kind`, all or none,
   * or fails `rate-limited` with the wait until they are there. They count as spent until given back.
   */
  readonly spend: (kind: CreditKind, count?: number) => Effect.Effect<HeldCredits, SourceError>
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

type Owed = Readonly<Record<CreditKind, number>>
const NOTHING_OWED: Owed = { lists: 0, cold: 0, refresh: 0 }
const sumOf = (owed: Owed) => owed.lists + owed.cold + owed.refresh
const isOwing = (owed: Owed) => owed.lists !== 0 || owed.cold !== 0 || owed.refresh !== 0

/**
 * `state` less what was spent without it (or plus what was given back without it: owed below zero), each
 * part within zero and its capacity, the month's count moved by as much.
 */
const withOwed = (state: CreditState, owed: Owed, plan: CreditPlan): CreditState => ({
  ...state,
  ...spill({
    lists: Math.max(0, state.lists - owed.lists),
    cold: Math.max(0, state.cold - owed.cold),
    refresh: Math.max(0, state.refresh - owed.refresh)
  }, plan),
  spent: Math.max(0, state.spent + sumOf(owed))
})

export const makeMonthlyBudget = (plan: CreditPlan, cell: DurableCellShape, options: { readonly workers: number } = { workers: 1 }) =>
  Effect.gen(function*() {
    const ownPlan = shareOf(plan, Math.max(1, options.workers))
    // This process's own ledger while the store is away, and what it spent (or gave back) from it.
    let local: CreditState | undefined
    let owed: Owed = NOTHING_OWED
    let lastSpent = 0
    let storeDown = false
    // One log line per hold: when the pace first refuses a refresh, then not until one is granted again.
    let refreshHeld = false

    const publish = (state: CreditState) => recordCredits("coingecko", state.spent, Math.max(0, plan.perMonth - state.spent))

    /** The stored ledger at `now`: repaired when out of its bounds, recovered when an older build kept it. */
    const readStored = (text: string | undefined, now: number) =>
      Effect.gen(function*() {
        const stored = parseState(text)
        if (text !== undefined && stored === undefined) {
          // A value that is not a ledger (corrupted, another release's) starts empty, not full.
          yield* Effect.logWarning("rates: the credit ledger holds no ledger; starting it empty")
          return { base: emptyState(now), recovered: undefined }
        }
        if (stored === undefined) return { base: undefined, recovered: undefined }
        const { repaired, state } = repairState(stored, plan, now)
        if (repaired.length > 0) yield* Effect.logWarning(`rates: the credit ledger was out of its bounds, repaired: ${repaired.join("; ")}`)
        const recovered = recoverAttempts(state, plan, now)
        return { base: recovered.state, recovered: recovered.state === state ? undefined : recovered.given }
      })

    /**
     * Read, repair, recover, settle what is owed, `change`, compare-and-set; again when another instance
     * wrote in between. Undefined when contention outlasted the races allowed.
     */
    const updateShared = <R>(change: (base: CreditState | undefined, now: number) => { readonly state: CreditState; readonly result: R }) =>
      Effect.gen(function*() {
        for (let race = 0; race < MAX_RACES; race++) {
          const now = yield* cell.now
          const text = yield* cell.get(LEDGER)
          const { recovered, ...read } = yield* readStored(text, now)
          let base = read.base
          const owing = owed
          if (isOwing(owing)) base = withOwed(base === undefined ? initialState(plan, now) : settle(base, plan, now), owing, plan)
          const changed = change(base, now)
          if (yield* cell.compareAndSet(LEDGER, text, JSON.stringify(changed.state))) {
            // At once, before anything else runs: the metric follows the ledger's writes in their order.
            publish(changed.state)
            if (recovered !== undefined) {
              yield* Effect.logInfo(
                `rates: the credit ledger was kept by a build that charged refused calls too; ${Math.floor(recovered)} credits given back within the month's allowance`
              )
            }
            if (isOwing(owing)) {
              yield* Effect.logInfo(`rates: what this process spent while the ledger was away (${sumOf(owing)} credits) is now in it`)
              // Less what was settled: calls ending meanwhile may have owed more.
              owed = { lists: owed.lists - owing.lists, cold: owed.cold - owing.cold, refresh: owed.refresh - owing.refresh }
            }
            lastSpent = changed.state.spent
            return changed
          }
        }
        return undefined
      })

    const owe = (kind: CreditKind, count: number) => {
      owed = { ...owed, [kind]: owed[kind] + count }
    }

    /** From this process's own ledger: empty when the store went away, filling at its share of the pace. */
    const takeLocal = (kind: CreditKind, count: number, now: number) => {
      const taken = take(local ?? emptyState(now, lastSpent), ownPlan, kind, now, count)
      local = taken.state
      if (taken.granted) owe(kind, count)
      return taken
    }

    /** Credits not billed, back to where they were taken; when the shared ledger cannot take them now, owed to it. */
    const returnCredits = (kind: CreditKind, count: number, month: string, fromShared: boolean) =>
      Effect.gen(function*() {
        if (fromShared && !storeDown) {
          const given = yield* Effect.result(updateShared((base, now) => ({ state: giveBack(base, plan, kind, count, month, now), result: undefined })))
          if (given._tag === "Success" && given.success !== undefined) return
        }
        owe(kind, -count)
        // Taken from this process's own ledger (the store away), they go back to it too.
        if (!fromShared && local !== undefined) {
          local = giveBack(local, ownPlan, kind, count, month, yield* Clock.currentTimeMillis)
          publish(local)
        }
      })

    const held = (kind: CreditKind, count: number, month: string, fromShared: boolean): HeldCredits => {
      let left = count
      return {
        giveBack: (back) =>
          Effect.suspend(() => {
            const returned = Math.min(Math.max(0, back), left)
            if (returned === 0) return Effect.void
            left -= returned
            return returnCredits(kind, returned, month, fromShared)
          })
      }
    }

    const spend = (kind: CreditKind, count = 1): Effect.Effect<HeldCredits, SourceError> =>
      Effect.gen(function*() {
        const shared = yield* Effect.result(updateShared((base, now) => {
          const taken = take(base, plan, kind, now, count)
          return { state: taken.state, result: taken }
        }))
        let taken: Taken
        if (shared._tag === "Success") {
          if (storeDown) yield* Effect.logInfo(`rates: the credit ledger (${cell.store}) answers again`)
          storeDown = false
          local = undefined
          // Contention this high means instances spend faster than the pace anyway: refuse this one.
          taken = shared.success?.result ?? { state: emptyState(yield* Clock.currentTimeMillis, lastSpent), granted: false, waitMs: 1_000 }
        } else {
          if (!storeDown) {
            yield* Effect.logWarning(
              `rates: the credit ledger (${cell.store}) failed; spending this process's share of the pace (1/${options.workers}) meanwhile`,
              shared.failure.message
            )
          }
          storeDown = true
          taken = takeLocal(kind, count, yield* Clock.currentTimeMillis)
          publish(taken.state)
        }
        const seconds = Math.max(1, Math.ceil(taken.waitMs / 1000))
        if (taken.granted) {
          if (kind === "refresh") refreshHeld = false
          return held(kind, count, taken.state.month, shared._tag === "Success")
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
