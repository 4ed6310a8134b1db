/**
 * The arithmetic of CoinGecko's monthly credits (CONTRACT C4 "Over a month"), pure: no clock, no I/O.
 *
 * One credit a call. The month's credits come back continuously, at the pace that spends the plan in
 * the longest month (31 days) with its reserve included, so that no calendar month, whatever day the
 * service was deployed, spends more than the plan:
 *
 *   pace = (perMonth − reserve) / 44,640 minutes,   reserve = 2 % of perMonth
 *   Demo  10,000: reserve 200, pace 9,800 / 44,640 = 0.2195 a minute (one call every 4.6 minutes)
 *   Basic 100,000: reserve 2,000, pace 2.195 a minute (one call every 27 seconds)
 *   any 31 days spend at most reserve + pace × 44,640 = perMonth.
 *
 * The reserve absorbs bursts, in two parts with their own share of the pace, so that neither kind of
 * call starves the other: calls a request waits for ("cold": 3/4 of the reserve, 1/4 of the pace) and
 * calls nobody waits for ("refresh": the popular prices refreshed behind, the daily points, the coin
 * index; 1/4 of the reserve, 3/4 of the pace). What a full part would gain spills into the other, so
 * an idle kind lends its pace to the busy one, never its reserve.
 */

export type CreditKind = "cold" | "refresh"

/** The plan's share kept as a reserve for bursts, and the cold part of the reserve and of the pace. */
const RESERVE_SHARE = 0.02
const COLD_RESERVE_SHARE = 0.75
const COLD_PACE_SHARE = 0.25
export const LONGEST_MONTH_MS = 31 * 86_400_000

export interface CreditPlan {
  readonly perMonth: number
  /** Credits that come back per millisecond, both parts together. */
  readonly ratePerMs: number
  readonly capacity: Readonly<Record<CreditKind, number>>
  readonly rate: Readonly<Record<CreditKind, number>>
}

export const planFor = (perMonth: number): CreditPlan => {
  const reserve = perMonth * RESERVE_SHARE
  const ratePerMs = (perMonth - reserve) / LONGEST_MONTH_MS
  // A part smaller than one credit could never grant a call.
  const cold = Math.max(1, reserve * COLD_RESERVE_SHARE)
  const refresh = Math.max(1, reserve - cold)
  return {
    perMonth,
    ratePerMs,
    capacity: { cold, refresh },
    rate: { cold: ratePerMs * COLD_PACE_SHARE, refresh: ratePerMs * (1 - COLD_PACE_SHARE) }
  }
}

/** What is stored (as JSON), shared by every instance. */
export interface CreditState {
  readonly cold: number
  readonly refresh: number
  /** When the levels were last brought up to date (epoch ms). */
  readonly at: number
  /** The calendar month (UTC) `spent` counts, `2026-11`. */
  readonly month: string
  readonly spent: number
}

export const monthOf = (epochMs: number): string => new Date(epochMs).toISOString().slice(0, 7)

/** A new ledger starts with its reserve full (at most 2 % of the month: a new deployment's burst). */
export const initialState = (plan: CreditPlan, now: number): CreditState => ({
  cold: plan.capacity.cold,
  refresh: plan.capacity.refresh,
  at: now,
  month: monthOf(now),
  spent: 0
})

/** The levels at `now`: the credits come back since `at`, each part up to its capacity, the excess spilling over. */
export const settle = (state: CreditState, plan: CreditPlan, now: number): CreditState => {
  // A clock that went back gives nothing back, and moves nothing.
  const elapsed = Math.max(0, now - state.at)
  let cold = state.cold + elapsed * plan.rate.cold
  let refresh = state.refresh + elapsed * plan.rate.refresh
  if (cold > plan.capacity.cold) {
    refresh += cold - plan.capacity.cold
    cold = plan.capacity.cold
  }
  if (refresh > plan.capacity.refresh) {
    cold = Math.min(plan.capacity.cold, cold + refresh - plan.capacity.refresh)
    refresh = plan.capacity.refresh
  }
  const at = Math.max(state.at, now)
  const month = monthOf(at)
  return { cold, refresh, at, month, spent: month === state.month ? state.spent : 0 }
}

export interface Taken {
  readonly state: CreditState
  readonly granted: boolean
  /** When not granted: milliseconds until this kind has a credit again, at its own pace. */
  readonly waitMs: number
}

/** Takes one credit of `kind` at `now`, if its part holds one. */
export const take = (previous: CreditState | undefined, plan: CreditPlan, kind: CreditKind, now: number): Taken => {
  const state = previous === undefined ? initialState(plan, now) : settle(previous, plan, now)
  const level = state[kind]
  if (level >= 1) return { state: { ...state, [kind]: level - 1, spent: state.spent + 1 }, granted: true, waitMs: 0 }
  return { state, granted: false, waitMs: Math.ceil((1 - level) / plan.rate[kind]) }
}

const isFiniteNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

/** Reads a stored state back; anything else (another release's, a corrupted value) is no state. */
export const parseState = (text: string | undefined): CreditState | undefined => {
  if (text === undefined) return undefined
  try {
    const value = JSON.parse(text) as Partial<CreditState> | null
    if (
      value !== null && isFiniteNumber(value.cold) && isFiniteNumber(value.refresh) && isFiniteNumber(value.at) &&
      typeof value.month === "string" && isFiniteNumber(value.spent)
    ) return { cold: value.cold, refresh: value.refresh, at: value.at, month: value.month, spent: value.spent }
  } catch {
    // fall through: not ours
  }
  return undefined
}
