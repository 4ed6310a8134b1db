/**
 * The month's arithmetic (src/rates/coingecko/credits/monthlyCredits.ts): the pace spends the plan in the
 * longest month with the reserve included, the parts lend their pace but never their reserve (the lists'
 * part lends, never borrows), a month of the greediest spending stays within the plan whatever day it
 * starts, and a stored ledger out of its bounds is repaired. Credits are billed per answer 200 (issue 35,
 * finding 1): calls paid together take theirs all at once or none, a call CoinGecko did not bill gives its
 * credit back, and a ledger an older build drained with refusals is recovered within the month's allowance.
 */
import { describe, expect, it } from "vitest"
import {
  type CreditKind,
  type CreditState,
  giveBack,
  LONGEST_MONTH_MS,
  parseState,
  planFor,
  recoverAttempts,
  repairState,
  settle,
  take
} from "../../../../src/rates/coingecko/credits/monthlyCredits.ts"

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
  it("states the pace of Demo and Basic as docs/rates.md does", () => {
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
    const empty: CreditState = { lists: 0, cold: 0, refresh: 0, at: 0, month: "1970-01", spent: 0, billed: "answers" }
    const refused = take(empty, plan, "refresh", 0)
    expect(refused.granted).toBe(false)
    expect(refused.waitMs).toBe(Math.ceil(1 / plan.rate.refresh))
    expect(take(refused.state, plan, "refresh", refused.waitMs).granted).toBe(true)
  })

  it("counts the calendar month's spend and starts again at the next", () => {
    const plan = planFor(10_000)
    const lastMinute = Date.parse("2026-11-30T23:59:00Z")
    const taken = take({ lists: 6, cold: 10, refresh: 10, at: lastMinute, month: "2026-11", spent: 9_000, billed: "answers" }, plan, "cold", lastMinute)
    expect(taken.state.spent).toBe(9_001)
    expect(settle(taken.state, plan, lastMinute + 2 * MINUTE)).toMatchObject({ month: "2026-12", spent: 0 })
  })

  it("gives nothing back when the clock goes back", () => {
    const plan = planFor(10_000)
    const state: CreditState = { lists: 1, cold: 1, refresh: 1, at: 10 * DAY, month: "1970-01", spent: 0, billed: "answers" }
    expect(settle(state, plan, 9 * DAY)).toMatchObject({ lists: 1, cold: 1, refresh: 1, at: 10 * DAY })
  })

  it("reads back only what it wrote; a ledger written before the lists had their part gets theirs full; one written before answers 200 alone were billed says so", () => {
    expect(parseState(JSON.stringify({ lists: 5, cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4, billed: "answers" }))).toEqual({ lists: 5, cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4, billed: "answers" })
    expect(parseState(JSON.stringify({ lists: 5, cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4 }))?.billed).toBe("attempts")
    expect(parseState(JSON.stringify({ cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4 }))?.lists).toBe(Number.POSITIVE_INFINITY)
    for (const text of ["", "null", "{}", "[1]", "{\"cold\":\"1\",\"refresh\":2,\"at\":3,\"month\":\"x\",\"spent\":0}", "not json"]) {
      expect(parseState(text)).toBeUndefined()
    }
  })

  it("repairs a stored ledger out of its bounds: levels within their parts, no time ahead, no untrusted month", () => {
    const plan = planFor(10_000)
    const now = Date.parse("2026-11-25T12:00:00Z")
    const good: CreditState = { lists: 6, cold: 100, refresh: 10, at: now - MINUTE, month: "2026-11", spent: 500, billed: "answers" }
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

  it("takes the credits of calls paid together all at once or none, with the wait for the whole unit", () => {
    const plan = planFor(10_000)
    const now = Date.parse("2026-11-25T12:00:00Z")
    const three: CreditState = { lists: 3.5, cold: 0, refresh: 0, at: now, month: "2026-11", spent: 10, billed: "answers" }
    const refused = take(three, plan, "lists", now, 4)
    expect(refused).toMatchObject({ granted: false, waitMs: Math.ceil(0.5 / plan.rate.lists) })
    expect(refused.state.lists).toBe(3.5)
    const granted = take(three, plan, "lists", now, 3)
    expect(granted.granted).toBe(true)
    expect(granted.state).toMatchObject({ lists: 0.5, spent: 13 })
  })

  it("gives back a credit whose call was not billed: to its part (a full part spills as the pace does), off the month's count", () => {
    const plan = planFor(10_000)
    const now = Date.parse("2026-11-25T12:00:00Z")
    const taken = take({ lists: 6, cold: 145.5, refresh: 10, at: now, month: "2026-11", spent: 100, billed: "answers" }, plan, "cold", now)
    expect(taken.state).toMatchObject({ cold: 144.5, spent: 101 })
    expect(giveBack(taken.state, plan, "cold", 1, "2026-11", now)).toMatchObject({ lists: 6, cold: 145.5, refresh: 10, spent: 100 })
    // The part filled up meanwhile: what it cannot hold goes to the refresh part, as the pace would.
    expect(giveBack({ ...taken.state, cold: 145 }, plan, "cold", 1, "2026-11", now)).toMatchObject({ cold: 145.5, refresh: 10.5, spent: 100 })
    // Taken last month: this month's count is not last month's.
    const nextMonth = Date.parse("2026-12-01T00:00:01Z")
    expect(giveBack(taken.state, plan, "cold", 1, "2026-11", nextMonth)).toMatchObject({ month: "2026-12", spent: 0 })
  })

  it("recovers a ledger an older build drained with refusals, within what the calendar month still allows, once", () => {
    const plan = planFor(10_000)
    // A week of 403s into November, every attempt charged: the parts drained, 400 attempts counted.
    const weekIn = Date.parse("2026-11-08T00:00:00Z")
    const drained: CreditState = { lists: 0, cold: 0.2, refresh: 0, at: weekIn, month: "2026-11", spent: 400, billed: "attempts" }
    const recovered = recoverAttempts(drained, plan, weekIn)
    expect(recovered.state).toMatchObject({ ...plan.capacity, spent: 400, billed: "answers" })
    expect(recovered.given).toBeCloseTo(200 - 0.2, 6)
    // Once: the ledger now counts answers 200.
    expect(recoverAttempts(recovered.state, plan, weekIn)).toEqual({ state: recovered.state, given: 0 })
    // The month's allowance nearly spent (the reserve and a week's pace, 2,413 credits): only what is left.
    const allowed = 200 + plan.ratePerMs * 7 * DAY
    const busy = recoverAttempts({ ...drained, spent: allowed - 0.2 - 10 }, plan, weekIn)
    expect(busy.given).toBeCloseTo(10, 6)
    expect(busy.state.lists).toBe(6)
    expect(busy.state.cold).toBeCloseTo(4.2, 6)
    expect(busy.state.refresh).toBe(0)
    expect(recoverAttempts({ ...drained, spent: allowed + 50 }, plan, weekIn).given).toBe(0)
    // Whatever the ledger counted, what the month can spend at most (its count, what the parts hold, the
    // pace to its end) passes the plan no more after the recovery than before it.
    const paceToMonthEnd = plan.ratePerMs * (Date.parse("2026-12-01T00:00:00Z") - weekIn)
    for (const spent of [0, 400, 2_000, 2_413, 5_000]) {
      const { state } = recoverAttempts({ ...drained, spent }, plan, weekIn)
      const before = spent + 0.2 + paceToMonthEnd
      expect(spent + state.lists + state.cold + state.refresh + paceToMonthEnd).toBeLessThanOrEqual(Math.max(10_000, before) + 1e-6)
    }
  })
})
