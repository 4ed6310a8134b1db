/**
 * CoinGecko's monthly credits at the month's even pace (monthlyCredits.ts), in a DurableCell on the store's clock:
 * restarts and instances add no credit. A call's credit is held in flight, given back when not billed (not 200:
 * CONTRACT C4 "Over a month", amended). Fail closed: while the store fails, a process spends from its own ledger,
 * empty at first, at its share of the pace (platform/processCount), settled into the shared one afterwards.
 */
import { Clock, Context, Duration, Effect, Layer } from "effect"
import type { RateLimiter } from "effect/persistence"
import { DurableCell, type DurableCellShape } from "../../../platform/durableCell/DurableCell.ts"
import { alone, ProcessCount, type ProcessCountShape } from "../../../platform/processCount/ProcessCount.ts"
import { makeMemoryCell } from "../../../platform/durableCell/memory.ts"
import { recordCredits } from "../../../observability/metrics.ts"
import { type Charge, failWithFor, type SourceError } from "../../upstream.ts"
import { CoinGeckoConfig, type CoinGeckoConfigShape } from "../CoinGeckoConfig.ts"
import {
  type CreditKind,
  type CreditPlan,
  type CreditState,
  emptyState,
  giveBack,
  initialState,
  type LedgerChange,
  ledgerAt,
  ledgerStep,
  NOTHING_OWED,
  type Owed,
  planFor,
  shareOf,
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
  /** Takes `count` credits (default 1) for calls of `kind`, all or none, or fails `RateLimited` with the wait. */
  readonly spend: (kind: CreditKind, count?: number) => Effect.Effect<HeldCredits, SourceError>
  readonly snapshot: Effect.Effect<CreditSnapshot>
}>()("app/rates/MonthlyBudget") {
  /** The plan's credits (COINGECKO_CALLS_PER_MONTH) in the DurableCell given. */
  static readonly layer: Layer.Layer<MonthlyBudget, never, DurableCell | CoinGeckoConfig | ProcessCount> = Layer.effect(
    MonthlyBudget,
    Effect.gen(function*() {
      const config = yield* CoinGeckoConfig
      return yield* makeMonthlyBudget(planFor(config.callsPerMonth, config.listsPerLoad), yield* DurableCell, { processes: yield* ProcessCount })
    })
  )

  /** In memory, with `perMonth` credits (tests; what a restart keeps is a test of `layer`). */
  static readonly layerMemory = (perMonth: number): Layer.Layer<MonthlyBudget> =>
    Layer.effect(MonthlyBudget, makeMonthlyBudget(planFor(perMonth), makeMemoryCell()))
}

/** The cell's name: one ledger per upstream key (REDIS_KEY_PREFIX and the store keep deployments apart). */
export const LEDGER = "coingecko-credits"
const MAX_RACES = 16
const sumOf = (owed: Owed) => owed.lists + owed.cold + owed.refresh

export const makeMonthlyBudget = (plan: CreditPlan, cell: DurableCellShape, options: { readonly processes: ProcessCountShape } = { processes: alone }) =>
  Effect.gen(function*() {
    // While the store is away: this process's part of the plan (over the processes known when it went), its own ledger,
    // and what it spent (or gave back) from it.
    let ownPlan = shareOf(plan, options.processes.current())
    let local: CreditState | undefined
    let owed: Owed = NOTHING_OWED
    let lastSpent = 0
    let storeDown = false
    // One log line per hold: when the pace first refuses a refresh, then not until one is granted again.
    let refreshHeld = false
    const publish = (state: CreditState) => recordCredits("coingecko", state.spent, Math.max(0, plan.perMonth - state.spent))

    /** One `ledgerStep` (monthlyCredits.ts) per compare-and-set, again if another wrote; undefined past MAX_RACES. */
    const updateShared = (change: LedgerChange) =>
      Effect.gen(function*() {
        for (let race = 0; race < MAX_RACES; race++) {
          const now = yield* cell.now
          const text = yield* cell.get(LEDGER)
          const owing = owed
          const step = ledgerStep(text, plan, now, owing, change)
          if (step.unreadable) yield* Effect.logWarning("rates: the credit ledger holds no ledger; starting it empty")
          if (step.repaired.length > 0) yield* Effect.logWarning(`rates: the credit ledger was out of its bounds, repaired: ${step.repaired.join("; ")}`)
          if (yield* cell.compareAndSet(LEDGER, text, step.text)) {
            const state = step.taken.state
            // At once, before anything else runs: the metric follows the ledger's writes in their order.
            publish(state)
            if (step.recovered !== undefined) {
              yield* Effect.logInfo(
                `rates: the credit ledger was kept by a build that charged refused calls too; ${Math.floor(step.recovered)} credits given back within the month's allowance`
              )
            }
            if (step.settledOwed) {
              yield* Effect.logInfo(`rates: what this process spent while the ledger was away (${sumOf(owing)} credits) is now in it`)
              // Less what was settled: calls ending meanwhile may have owed more.
              owed = { lists: owed.lists - owing.lists, cold: owed.cold - owing.cold, refresh: owed.refresh - owing.refresh }
            }
            lastSpent = state.spent
            return step.taken
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
          const given = yield* Effect.result(updateShared({ _tag: "GiveBack", kind, count, month }))
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
        const shared = yield* Effect.result(updateShared({ _tag: "Take", kind, count }))
        let taken: Taken
        if (shared._tag === "Success") {
          if (storeDown) yield* Effect.logInfo(`rates: the credit ledger (${cell.store}) answers again`)
          storeDown = false
          local = undefined
          // Contention this high means instances spend faster than the pace anyway: refuse this one.
          taken = shared.success ?? { state: emptyState(yield* Clock.currentTimeMillis, lastSpent), granted: false, waitMs: 1_000 }
        } else {
          if (!storeDown) {
            const sharing = options.processes.current()
            ownPlan = shareOf(plan, sharing)
            yield* Effect.logWarning(
              `rates: the credit ledger (${cell.store}) failed; spending this process's share of the pace (1/${sharing}) meanwhile`,
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
        return yield* failWithFor("coingecko")("RateLimited", `the month's ${kind} credits are spent for now (${plan.perMonth} a month, at an even pace)`, seconds)
      })

    const snapshot = Effect.gen(function*() {
      const now = yield* Effect.catch(cell.now, () => Clock.currentTimeMillis)
      const state = ledgerAt(yield* Effect.orElseSucceed(cell.get(LEDGER), () => undefined), plan, now)
      return { plan, state: state ?? local ?? initialState(plan, now) }
    })

    return MonthlyBudget.of({ plan, spend, snapshot })
  })

/**
 * What a CoinGecko attempt costs (CONTRACT C4): a token of the minute's budget, refused or not; for a request also
 * of the cold pool and, first, of its caller's share (COINGECKO_CALLER_SHARE_PCT); then the month's credit.
 */
const fail = failWithFor("coingecko")

/** Callers hashed into 65,536 buckets: the memory store's keys stay bounded, and no address goes to Redis. */
const callerBucket = (caller: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < caller.length; i++) hash = Math.imul(hash ^ caller.charCodeAt(i), 0x01000193) >>> 0
  return hash & 0xffff
}

export interface Budget {
  /** One attempt of a data call: its minute's tokens, then a month's credit held for it; else `RateLimited`. */
  readonly spend: (charge: Charge, firstAttempt: boolean) => Effect.Effect<HeldCredits, SourceError>
  /** One call for the lists: a token of the minute's whole budget (their credits: `listCredits`). */
  readonly listCall: Effect.Effect<void, SourceError>
  /** The month's credits of `calls` calls for a list, from the lists' part, held together: all or none. */
  readonly listCredits: (calls: number) => Effect.Effect<HeldCredits, SourceError>
}

/** `limiter` keeps the buckets: in memory, or in Redis and this process's share while it fails (rates/redisDown.ts). */
export const makeBudget = (config: CoinGeckoConfigShape, limiter: RateLimiter.RateLimiter, month: MonthlyBudget["Service"]): Budget => {
  const bucket = (key: string, limit: number, spent: string) =>
    limiter.consume({ key, algorithm: "token-bucket", onExceeded: "fail", limit, window: "1 minute" }).pipe(
      Effect.catchTag("RateLimiterError", (error) =>
        error.reason._tag === "RateLimitExceeded" ? fail("RateLimited", spent, Math.ceil(Duration.toSeconds(error.reason.retryAfter))) : Effect.die(error)),
      Effect.asVoid
    )
  const coldLimit = Math.max(1, config.callsPerMinute - config.refreshReservePerMinute)
  const whole = bucket("coingecko:calls", config.callsPerMinute, `our upstream budget of ${config.callsPerMinute} calls/min is spent`)
  const cold = bucket("coingecko:cold", coldLimit, `the budget for new data (${coldLimit} calls/min) is spent`)
  const shareSpent = `this caller's share of the upstream budget (${config.callerCallsPerMinute} calls/min) is spent`
  const share = (caller: string) => bucket(`coingecko:caller:${callerBucket(caller)}`, config.callerCallsPerMinute, shareSpent)

  return {
    listCall: whole,
    listCredits: (calls) => month.spend("lists", calls),
    spend: (charge, firstAttempt) => {
      if (charge._tag === "Background") return Effect.andThen(whole, month.spend("refresh"))
      const shared = Effect.andThen(Effect.andThen(cold, whole), month.spend("cold"))
      return charge.caller !== undefined && firstAttempt ? Effect.andThen(share(charge.caller), shared) : shared
    }
  }
}
