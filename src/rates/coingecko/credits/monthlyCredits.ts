/**
 * The arithmetic of CoinGecko's monthly credits (CONTRACT C4 "Over a month"), pure. Credits come back at the pace
 * that spends the plan in 31 days with its reserve, so no calendar month spends more than the plan:
 *   pace = (perMonth − reserve) / 44,640 minutes, reserve = 2 % of perMonth (Demo: one call every 4.6 minutes).
 * Parts (lists, cold, refresh) keep kinds from starving each other; a full part spills into the next.
 */
import { DAY_MS } from "../../dailySeries.ts"

export type CreditKind = "lists" | "cold" | "refresh"
/** The plan's share kept as a reserve for bursts, and the cold part of the reserve and of the pace (lists apart). */
const RESERVE_SHARE = 0.02
const COLD_RESERVE_SHARE = 0.75
const COLD_PACE_SHARE = 0.25
export const LONGEST_MONTH_MS = 31 * DAY_MS

export interface CreditPlan {
  readonly perMonth: number
  /** Credits that come back per millisecond, every part together. */
  readonly ratePerMs: number
  readonly capacity: Readonly<Record<CreditKind, number>>
  readonly rate: Readonly<Record<CreditKind, number>>
}

/** The plan's parts; `listsPerLoad` is what one load of the lists calls (the currency list, the coin list, its rank pages). */
export const planFor = (perMonth: number, listsPerLoad = 6): CreditPlan => {
  const reserve = perMonth * RESERVE_SHARE
  const ratePerMs = (perMonth - reserve) / LONGEST_MONTH_MS
  // The lists: one load held back, one load a day; never more than half of the reserve or of the pace.
  const lists = Math.min(listsPerLoad, reserve / 2)
  const listsRate = Math.min(listsPerLoad / DAY_MS, ratePerMs / 2)
  // A part smaller than one credit could never grant a call.
  const cold = Math.max(1, (reserve - lists) * COLD_RESERVE_SHARE)
  const refresh = Math.max(1, reserve - lists - cold)
  const rest = ratePerMs - listsRate
  return {
    perMonth,
    ratePerMs,
    capacity: { lists, cold, refresh },
    rate: { lists: listsRate, cold: rest * COLD_PACE_SHARE, refresh: rest * (1 - COLD_PACE_SHARE) }
  }
}

/** What `spent` counts: answers 200, or every attempt in a ledger an older build kept (recoverAttempts). */
type Billed = "answers" | "attempts"
/** What is stored (as JSON), shared by every instance. */
export interface CreditState {
  readonly lists: number
  readonly cold: number
  readonly refresh: number
  /** When the levels were last brought up to date (epoch ms). */
  readonly at: number
  /** The calendar month (UTC) `spent` counts, `2026-11`. */
  readonly month: string
  readonly spent: number
  readonly billed: Billed
}

export const monthOf = (epochMs: number): string => new Date(epochMs).toISOString().slice(0, 7)
/** A new ledger starts with its reserve full (at most 2 % of the month: a new deployment's burst). */
export const initialState = (plan: CreditPlan, now: number): CreditState => ({
  ...plan.capacity,
  at: now,
  month: monthOf(now),
  spent: 0,
  billed: "answers"
})

/** A ledger with nothing to spend at `now`: what a process without its store, or a repaired ledger, starts from. */
export const emptyState = (now: number, spent = 0): CreditState => ({ lists: 0, cold: 0, refresh: 0, at: now, month: monthOf(now), spent, billed: "answers" })
type Levels = Readonly<Record<CreditKind, number>>

/** Levels within their parts' capacities, what a full part would hold spilling over (lists → refresh ⇄ cold). */
const spill = (levels: Levels, plan: CreditPlan): Levels => {
  let { cold, lists, refresh } = levels
  if (lists > plan.capacity.lists) {
    refresh += lists - plan.capacity.lists
    lists = plan.capacity.lists
  }
  if (cold > plan.capacity.cold) {
    refresh += cold - plan.capacity.cold
    cold = plan.capacity.cold
  }
  if (refresh > plan.capacity.refresh) {
    cold = Math.min(plan.capacity.cold, cold + refresh - plan.capacity.refresh)
    refresh = plan.capacity.refresh
  }
  return { lists, cold, refresh }
}

/** The levels at `now`: the credits come back since `at`, each part up to its capacity, the excess spilling over. */
export const settle = (state: CreditState, plan: CreditPlan, now: number): CreditState => {
  // A clock that went back gives nothing back, and moves nothing.
  const elapsed = Math.max(0, now - state.at)
  const levels = spill({
    lists: state.lists + elapsed * plan.rate.lists,
    cold: state.cold + elapsed * plan.rate.cold,
    refresh: state.refresh + elapsed * plan.rate.refresh
  }, plan)
  const at = Math.max(state.at, now)
  const month = monthOf(at)
  return { ...levels, at, month, spent: month === state.month ? state.spent : 0, billed: state.billed }
}

export interface Taken {
  readonly state: CreditState
  readonly granted: boolean
  /** When not granted: milliseconds until this kind has a credit again, at its own pace. */
  readonly waitMs: number
}

/** Takes `count` credits of `kind` at `now`, all or none, if its part holds them; spent until given back. */
export const take = (previous: CreditState | undefined, plan: CreditPlan, kind: CreditKind, now: number, count = 1): Taken => {
  const state = previous === undefined ? initialState(plan, now) : settle(previous, plan, now)
  const level = state[kind]
  if (level >= count) return { state: { ...state, [kind]: level - count, spent: state.spent + count }, granted: true, waitMs: 0 }
  return { state, granted: false, waitMs: Math.ceil((count - level) / plan.rate[kind]) }
}

/** Credits of calls not billed, back to their part (spilling over as the pace does) and off `spent` in `month`. */
export const giveBack = (previous: CreditState | undefined, plan: CreditPlan, kind: CreditKind, count: number, month: string, now: number): CreditState => {
  const state = previous === undefined ? initialState(plan, now) : settle(previous, plan, now)
  const levels = spill({ lists: state.lists, cold: state.cold, refresh: state.refresh, [kind]: state[kind] + count }, plan)
  return { ...state, ...levels, spent: state.month === month ? Math.max(0, state.spent - count) : state.spent }
}

/** An older build's ledger (it charged every attempt): what the month can still spend goes back to the parts, once. */
export const recoverAttempts = (state: CreditState, plan: CreditPlan, now: number): { readonly state: CreditState; readonly given: number } => {
  if (state.billed === "answers") return { state, given: 0 }
  const settled = settle(state, plan, now)
  const date = new Date(settled.at)
  const monthBegan = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
  const reserve = plan.perMonth - plan.ratePerMs * LONGEST_MONTH_MS
  const allowed = reserve + plan.ratePerMs * (settled.at - monthBegan)
  let room = Math.max(0, allowed - settled.spent - (settled.lists + settled.cold + settled.refresh))
  const levels = { lists: settled.lists, cold: settled.cold, refresh: settled.refresh }
  for (const kind of ["lists", "cold", "refresh"] as const) {
    const added = Math.min(room, Math.max(0, plan.capacity[kind] - levels[kind]))
    levels[kind] += added
    room -= added
  }
  const given = levels.lists + levels.cold + levels.refresh - (settled.lists + settled.cold + settled.refresh)
  return { state: { ...settled, ...levels, billed: "answers" }, given }
}

const isFiniteNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)
/** Reads a stored state back as it was written; anything else (another release's, a corrupted value) is no state. */
export const parseState = (text: string | undefined): CreditState | undefined => {
  if (text === undefined) return undefined
  try {
    const value = JSON.parse(text) as Partial<CreditState> | null
    if (
      value !== null && isFiniteNumber(value.cold) && isFiniteNumber(value.refresh) && isFiniteNumber(value.at) &&
      typeof value.month === "string" && isFiniteNumber(value.spent)
    ) {
      // A ledger of the release before the lists had their part: theirs is full.
      const lists = isFiniteNumber(value.lists) ? value.lists : Number.POSITIVE_INFINITY
      // A ledger of the releases that charged every attempt says nothing of it.
      const billed = value.billed === "answers" ? "answers" : "attempts"
      return { lists, cold: value.cold, refresh: value.refresh, at: value.at, month: value.month, spent: value.spent, billed }
    }
  } catch {
    // fall through: not ours
  }
  return undefined
}

/** A stored state brought within its bounds at `now` (the store's clock), and what was out of them. */
export const repairState = (state: CreditState, plan: CreditPlan, now: number): { readonly state: CreditState; readonly repaired: ReadonlyArray<string> } => {
  const repaired: Array<string> = []
  const lastMonthBegan = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth() - 1, 1)
  // Date's range is ±8.64e15 ms: a time outside it has no month at all.
  if (Math.abs(state.at) > 8.64e15 || state.month !== monthOf(state.at) || state.at < lastMonthBegan) {
    repaired.push(`a time (${state.at}) and month (${state.month}) that do not agree or are not recent: emptied`)
    return { state: emptyState(now, state.month === monthOf(now) ? Math.max(0, state.spent) : 0), repaired }
  }
  const level = (kind: CreditKind) => {
    const value = state[kind]
    const bounded = Math.min(Math.max(value, 0), plan.capacity[kind])
    if (bounded !== value && Number.isFinite(value)) repaired.push(`${kind} ${value} outside 0..${plan.capacity[kind]}`)
    return bounded
  }
  const lists = level("lists")
  const cold = level("cold")
  const refresh = level("refresh")
  let at = state.at
  if (at > now) {
    repaired.push(`a time ${at - now} ms ahead of the store's`)
    at = now
  }
  const spent = Math.max(0, state.spent)
  if (spent !== state.spent) repaired.push(`spent ${state.spent}`)
  return { state: { lists, cold, refresh, at, month: monthOf(at), spent, billed: state.billed }, repaired }
}

/** The plan one of `workers` processes spends alone: its share of every part and of the pace. */
export const shareOf = (plan: CreditPlan, workers: number): CreditPlan => {
  const part = (values: Levels) => ({ lists: values.lists / workers, cold: values.cold / workers, refresh: values.refresh / workers })
  return { perMonth: plan.perMonth / workers, ratePerMs: plan.ratePerMs / workers, capacity: part(plan.capacity), rate: part(plan.rate) }
}

/** What a process spent without the shared ledger (given back without it: below zero), per kind. */
export type Owed = Levels
export const NOTHING_OWED: Owed = { lists: 0, cold: 0, refresh: 0 }
/** What one write of the shared ledger does: take credits for calls, or give back those of calls not billed. */
export type LedgerChange =
  | { readonly _tag: "Take"; readonly kind: CreditKind; readonly count: number }
  | { readonly _tag: "GiveBack"; readonly kind: CreditKind; readonly count: number; readonly month: string }
/** One attempt at the shared ledger: what to write, its outcome, and what its read found (to log). */
export interface LedgerStep {
  /** The ledger to compare-and-set in place of the one read. */
  readonly text: string
  readonly taken: Taken
  /** The text read was no ledger: started empty. */
  readonly unreadable: boolean
  /** What was out of its bounds and repaired (repairState). */
  readonly repaired: ReadonlyArray<string>
  /** Credits given back to a ledger an older build kept (recoverAttempts), when it was one. */
  readonly recovered: number | undefined
  /** Whether `owed` is in the ledger written. */
  readonly settledOwed: boolean
}

/** One compare-and-set attempt (MonthlyBudget.ts): `text` at `now` repaired, recovered, owed settled, changed. */
export const ledgerStep = (text: string | undefined, plan: CreditPlan, now: number, owed: Owed, change: LedgerChange): LedgerStep => {
  const stored = parseState(text)
  // A value that is not a ledger (corrupted, another release's) starts empty, not full.
  const unreadable = text !== undefined && stored === undefined
  let base: CreditState | undefined = unreadable ? emptyState(now) : undefined
  let repaired: ReadonlyArray<string> = []
  let recovered: number | undefined
  if (stored !== undefined) {
    const repair = repairState(stored, plan, now)
    repaired = repair.repaired
    const recovery = recoverAttempts(repair.state, plan, now)
    base = recovery.state
    if (recovery.state !== repair.state) recovered = recovery.given
  }
  const settledOwed = owed.lists !== 0 || owed.cold !== 0 || owed.refresh !== 0
  if (settledOwed) {
    // Less what was spent without it (plus what was given back without it), each part within zero and its capacity.
    const state = base === undefined ? initialState(plan, now) : settle(base, plan, now)
    base = {
      ...state,
      ...spill({
        lists: Math.max(0, state.lists - owed.lists),
        cold: Math.max(0, state.cold - owed.cold),
        refresh: Math.max(0, state.refresh - owed.refresh)
      }, plan),
      spent: Math.max(0, state.spent + owed.lists + owed.cold + owed.refresh)
    }
  }
  const taken: Taken = change._tag === "Take"
    ? take(base, plan, change.kind, now, change.count)
    : { state: giveBack(base, plan, change.kind, change.count, change.month, now), granted: true, waitMs: 0 }
  return { text: JSON.stringify(taken.state), taken, unreadable, repaired, recovered, settledOwed }
}

/** The ledger `text` as it stands at `now`, read, not changed (undefined: none stored, or not a ledger). */
export const ledgerAt = (text: string | undefined, plan: CreditPlan, now: number): CreditState | undefined => {
  const stored = parseState(text)
  return stored === undefined ? undefined : settle(repairState(stored, plan, now).state, plan, now)
}
