/**
 * The month's arithmetic (src/rates/coingecko/credits/monthlyCredits.ts): the pace spends the plan in the
 * longest month with the reserve included, the parts lend their pace but never their reserve (the lists'
 * part lends, never borrows), a month of the greediest spending stays within the plan whatever day it
 * starts, and a stored ledger out of its bounds is repaired.
 */
import { describe, expect, it } from "vitest"
import { type CreditKind, type CreditState, LONGEST_MONTH_MS, parseState, planFor, repairState, settle, take } from "../../../src/rates/coingecko/credits/monthlyCredits.ts"

const MINUTE = 60_000
const DAY = 86_400_000

/** Takes every credit of `kind` as soon as it exists, over `ms`, polling every `stepMs`. */
const drain = (perMonth: number, kind: CreditKind, start: number, ms: number, stepMs = MINUTE) => {
  const plan = planFor(perMonth)
  let state: CreditState | undefined
  let spent = 0
  for (let now = start; now <= start + ms; now += stepMs) {
    for (;;) {
      const taken = take(state, plan, kind, now)
      state = taken.state
      if (!taken.granted) break
      spent++
    }
  }
  return spent
}

describe("monthly credits", () => {
  it("states the pace of Demo and Basic as the README does", () => {
    expect(planFor(10_000).ratePerMs * MINUTE).toBeCloseTo(9_800 / 44_640, 6)
    expect(planFor(10_000).ratePerMs * MINUTE).toBeLessThanOrEqual(0.23)
    expect(planFor(100_000).ratePerMs * MINUTE).toBeCloseTo(98_000 / 44_640, 6)
    expect(planFor(10_000).capacity).toEqual({ lists: 6, cold: 145.5, refresh: 48.5 })
    expect(planFor(100_000).capacity).toEqual({ lists: 6, cold: 1_495.5, refresh: 498.5 })
    // A small plan: the lists keep one load (6 calls) of its 20, and a load a day of its pace.
    expect(planFor(1_000).capacity).toEqual({ lists: 6, cold: 10.5, refresh: 3.5 })
    expect(planFor(1_000).rate.lists * DAY).toBeCloseTo(6, 6)
  })

  it("spends at most the plan in any 31 days, taking every credit the moment it comes back", () => {
    for (const perMonth of [10_000, 100_000]) {
      for (const start of [Date.parse("2026-02-01T00:00:00Z"), Date.parse("2026-11-17T13:45:00Z")]) {
        const cold = drain(perMonth, "cold", start, LONGEST_MONTH_MS)
        const refresh = drain(perMonth, "refresh", start, LONGEST_MONTH_MS)
        const lists = drain(perMonth, "lists", start, LONGEST_MONTH_MS)
        // One kind alone takes the others' pace (it spills) but not their reserve; the lists take their own only.
        expect(cold).toBeLessThanOrEqual(perMonth)
        expect(refresh).toBeLessThanOrEqual(perMonth)
        expect(cold).toBeGreaterThan(perMonth * 0.96)
        expect(lists).toBeLessThanOrEqual(6 + 6 * 31)
      }
    }
  })

  it("keeps the cold reserve from refreshes and the refresh pace from cold queries", () => {
    const plan = planFor(10_000)
    const start = Date.parse("2026-11-01T00:00:00Z")
    // Refreshes take all they can: the cold part keeps its 145.5, the lists' their 6.
    let state: CreditState | undefined
    while (take(state, plan, "refresh", start).granted) state = take(state, plan, "refresh", start).state
    expect(take(state, plan, "cold", start).granted).toBe(true)
    expect(settle(state!, plan, start).cold).toBe(145.5)
    expect(settle(state!, plan, start).lists).toBe(6)
    // A burst of cold queries empties the cold part; the refreshes still get their pace an hour later.
    let burst: CreditState | undefined
    let cold = 0
    while (take(burst, plan, "cold", start).granted) {
      burst = take(burst, plan, "cold", start).state
      cold++
    }
    expect(cold).toBe(145)
    const hourLater = settle(burst!, plan, start + 60 * MINUTE)
    expect(hourLater.refresh).toBe(48.5) // full: it never lent its reserve
    // The refresh and lists parts, full, lend their pace: the cold part comes back at the whole pace.
    expect(hourLater.cold).toBeCloseTo(0.5 + 60 * plan.ratePerMs * MINUTE, 6)
    // While refreshes take their part as it comes, the cold part comes back at its own share only.
    let busy = burst!
    for (let now = start; now <= start + 60 * MINUTE; now += MINUTE) {
      for (let t = take(busy, plan, "refresh", now); ; t = take(busy, plan, "refresh", now)) {
        busy = t.state
        if (!t.granted) break
      }
    }
    expect(busy.cold).toBeCloseTo(0.5 + 60 * plan.rate.cold * MINUTE, 3)
  })

  it("says how long until a credit comes back", () => {
    const plan = planFor(10_000)
    const empty: CreditState = { lists: 0, cold: 0, refresh: 0, at: 0, month: "1970-01", spent: 0 }
    const refused = take(empty, plan, "refresh", 0)
    expect(refused.granted).toBe(false)
    expect(refused.waitMs).toBe(Math.ceil(1 / plan.rate.refresh))
    expect(take(refused.state, plan, "refresh", refused.waitMs).granted).toBe(true)
  })

  it("counts the calendar month's spend and starts again at the next", () => {
    const plan = planFor(10_000)
    const lastMinute = Date.parse("2026-11-30T23:59:00Z")
    const taken = take({ lists: 6, cold: 10, refresh: 10, at: lastMinute, month: "2026-11", spent: 9_000 }, plan, "cold", lastMinute)
    expect(taken.state.spent).toBe(9_001)
    expect(settle(taken.state, plan, lastMinute + 2 * MINUTE)).toMatchObject({ month: "2026-12", spent: 0 })
  })

  it("gives nothing back when the clock goes back", () => {
    const plan = planFor(10_000)
    const state: CreditState = { lists: 1, cold: 1, refresh: 1, at: 10 * DAY, month: "1970-01", spent: 0 }
    expect(settle(state, plan, 9 * DAY)).toMatchObject({ lists: 1, cold: 1, refresh: 1, at: 10 * DAY })
  })

  it("reads back only what it wrote; a ledger written before the lists had their part gets theirs full", () => {
    expect(parseState(JSON.stringify({ lists: 5, cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4 }))).toEqual({ lists: 5, cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4 })
    expect(parseState(JSON.stringify({ cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4 }))?.lists).toBe(Number.POSITIVE_INFINITY)
    for (const text of ["", "null", "{}", "[1]", "{\"cold\":\"1\",\"refresh\":2,\"at\":3,\"month\":\"x\",\"spent\":0}", "not json"]) {
      expect(parseState(text)).toBeUndefined()
    }
  })

  it("repairs a stored ledger out of its bounds: levels within their parts, no time ahead, no untrusted month", () => {
    const plan = planFor(10_000)
    const now = Date.parse("2026-11-25T12:00:00Z")
    const good: CreditState = { lists: 6, cold: 100, refresh: 10, at: now - MINUTE, month: "2026-11", spent: 500 }
    expect(repairState(good, plan, now)).toEqual({ state: good, repaired: [] })
    // Levels that would refuse for ever, or grant more than a reserve.
    const levels = repairState({ ...good, cold: -1e12, refresh: 1e9, lists: Number.POSITIVE_INFINITY }, plan, now)
    expect(levels.state).toMatchObject({ cold: 0, refresh: 48.5, lists: 6 })
    expect(levels.repaired).toHaveLength(2)
    // A time ahead (an instance a day ahead wrote it) is now: credits come back from now, the wait said is true.
    const ahead = repairState({ ...good, cold: 0, at: now + DAY, month: "2026-11" }, plan, now)
    expect(ahead.state.at).toBe(now)
    expect(take(ahead.state, plan, "cold", now).waitMs).toBe(Math.ceil(1 / plan.rate.cold))
    // A time of long ago, or a month that is not its time's: nothing to trust, empty (not a fresh reserve).
    for (const absurd of [{ ...good, at: 0, month: "1970-01" }, { ...good, at: 0 }, { ...good, month: "2026-10" }, { ...good, at: -1e20 }]) {
      expect(repairState(absurd, plan, now).state).toMatchObject({ lists: 0, cold: 0, refresh: 0, at: now, month: "2026-11" })
    }
  })
})
