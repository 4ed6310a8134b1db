/**
 * CoinGecko's monthly credits, spent at the month's even pace (monthlyCredits.ts has the rule and its
 * arithmetic). The ledger lives in a DurableCell (a file under DATA_DIR, Redis or PostgreSQL): a restart
 * or a second instance adds no credit.
 *
 * Each upstream call takes a credit of its kind first (budget.ts, asked by CoinGeckoClient.ts): "cold" when a request waits
 * for it, "refresh" when nobody does. No credit: the call is not made, and the caller gets
 * `rate-limited` with the seconds until one comes back (the request: a held copy, or 503).
 *
 * When the ledger's store fails, this process goes on with a ledger of its own, from the last state it
 * read (a process that never read one starts as a new ledger does, with the reserve): an outage of the
 * store costs at most one reserve per process, and never the answers.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { DurableCell, type DurableCellShape } from "../../../platform/durableCell/DurableCell.ts"
import { makeMemoryCell } from "../../../platform/durableCell/memory.ts"
import { recordCredits } from "../../../observability/metrics.ts"
import { failWithFor, type SourceError } from "../../upstream.ts"
import { CoinGeckoConfig } from "../CoinGeckoConfig.ts"
import { type CreditKind, type CreditPlan, type CreditState, initialState, monthOf, parseState, planFor, settle, take } from "./monthlyCredits.ts"

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
      return yield* makeMonthlyBudget(planFor(config.callsPerMonth), yield* DurableCell)
    })
  )

  /** In memory, with `perMonth` credits (tests; what a restart keeps is a test of `layer`). */
  static readonly layerMemory = (perMonth: number): Layer.Layer<MonthlyBudget> =>
    Layer.effect(MonthlyBudget, makeMonthlyBudget(planFor(perMonth), makeMemoryCell()))
}

/** The cell's name: one ledger per upstream key (REDIS_KEY_PREFIX and the store keep deployments apart). */
export const LEDGER = "coingecko-credits"
const MAX_RACES = 16

export const makeMonthlyBudget = (plan: CreditPlan, cell: DurableCellShape) =>
  Effect.gen(function*() {
    // This process's own ledger, used while the store is away.
    let local: CreditState | undefined
    let storeDown = false
    // One log line per hold: when the pace first refuses a refresh, then not until one is granted again.
    let refreshHeld = false

    const publish = (state: CreditState) => recordCredits("coingecko", state.spent, Math.max(0, plan.perMonth - state.spent))

    const emptyAt = (now: number): CreditState => ({ cold: 0, refresh: 0, at: now, month: monthOf(now), spent: local?.spent ?? 0 })

    /** Read, take, compare-and-set; again when another instance wrote in between. */
    const takeShared = (kind: CreditKind, now: number) =>
      Effect.gen(function*() {
        for (let race = 0; race < MAX_RACES; race++) {
          const text = yield* cell.get(LEDGER)
          const stored = parseState(text)
          // A value that is not a ledger (corrupted, another release's) starts empty, not full.
          const taken = take(text !== undefined && stored === undefined ? emptyAt(now) : stored, plan, kind, now)
          if (yield* cell.compareAndSet(LEDGER, text, JSON.stringify(taken.state))) return taken
        }
        // Contention this high means instances spend faster than the pace anyway: refuse this one.
        return { state: local ?? emptyAt(now), granted: false, waitMs: 1_000 }
      })

    const takeLocal = (kind: CreditKind, now: number) => {
      const taken = take(local, plan, kind, now)
      local = taken.state
      return taken
    }

    const spend = (kind: CreditKind): Effect.Effect<void, SourceError> =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const shared = yield* Effect.result(takeShared(kind, now))
        let taken
        if (shared._tag === "Success") {
          if (storeDown) yield* Effect.logInfo(`rates: the credit ledger (${cell.store}) answers again`)
          storeDown = false
          taken = shared.success
          local = taken.state
        } else {
          if (!storeDown) {
            yield* Effect.logWarning(`rates: the credit ledger (${cell.store}) failed; spending from this process's own meanwhile`, shared.failure.message)
          }
          storeDown = true
          taken = takeLocal(kind, now)
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
      const now = yield* Clock.currentTimeMillis
      const text = yield* Effect.orElseSucceed(cell.get(LEDGER), () => undefined)
      const stored = parseState(text) ?? local
      return { plan, state: stored === undefined ? initialState(plan, now) : settle(stored, plan, now) }
    })

    return MonthlyBudget.of({ plan, spend, snapshot })
  })
