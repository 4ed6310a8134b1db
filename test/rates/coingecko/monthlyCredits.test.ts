/**
 * The month's arithmetic (src/rates/credits/monthlyCredits.ts): the pace spends the plan in the longest
 * month with the reserve included, the two parts lend their pace but never their reserve, and a month
 * of the greediest spending stays within the plan whatever day it starts.
 */
import { describe, expect, it } from "vitest"
import { type CreditKind, type CreditState, LONGEST_MONTH_MS, parseState, planFor, settle, take } from "../../../src/rates/coingecko/credits/monthlyCredits.ts"

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
    expect(planFor(10_000).capacity).toEqual({ cold: 150, refresh: 50 })
    expect(planFor(100_000).capacity).toEqual({ cold: 1_500, refresh: 500 })
  })

  it("spends at most the plan in any 31 days, taking every credit the moment it comes back", () => {
    for (const perMonth of [10_000, 100_000]) {
      for (const start of [Date.parse("2026-02-01T00:00:00Z"), Date.parse("2026-11-17T13:45:00Z")]) {
        const cold = drain(perMonth, "cold", start, LONGEST_MONTH_MS)
        const refresh = drain(perMonth, "refresh", start, LONGEST_MONTH_MS)
        // One kind alone takes the other's pace (it spills) but not its reserve.
        expect(cold).toBeLessThanOrEqual(perMonth)
        expect(refresh).toBeLessThanOrEqual(perMonth)
        expect(cold).toBeGreaterThan(perMonth * 0.97)
      }
    }
  })

  it("keeps the cold reserve from refreshes and the refresh pace from cold queries", () => {
    const plan = planFor(10_000)
    const start = Date.parse("2026-11-01T00:00:00Z")
    // Refreshes take all they can: the cold part keeps its 150.
    let state: CreditState | undefined
    while (take(state, plan, "refresh", start).granted) state = take(state, plan, "refresh", start).state
    expect(take(state, plan, "cold", start).granted).toBe(true)
    expect(settle(state!, plan, start).cold).toBe(150)
    // A burst of cold queries empties the cold part; the refreshes still get their pace an hour later.
    let burst: CreditState | undefined
    let cold = 0
    while (take(burst, plan, "cold", start).granted) {
      burst = take(burst, plan, "cold", start).state
      cold++
    }
    expect(cold).toBe(150)
    const hourLater = settle(burst!, plan, start + 60 * MINUTE)
    expect(hourLater.refresh).toBe(50) // full: it never lent its reserve
    // The refresh part, full, lends its pace: the cold part comes back at the whole pace.
    expect(hourLater.cold).toBeCloseTo(60 * plan.ratePerMs * MINUTE, 6)
    // While refreshes take their part as it comes, the cold part comes back at its own share only.
    let busy = burst!
    for (let now = start; now <= start + 60 * MINUTE; now += MINUTE) {
      for (let t = take(busy, plan, "refresh", now); ; t = take(busy, plan, "refresh", now)) {
        busy = t.state
        if (!t.granted) break
      }
    }
    expect(busy.cold).toBeCloseTo(60 * plan.rate.cold * MINUTE, 3)
  })

  it("says how long until a credit comes back", () => {
    const plan = planFor(10_000)
    const empty: CreditState = { cold: 0, refresh: 0, at: 0, month: "1970-01", spent: 0 }
    const refused = take(empty, plan, "refresh", 0)
    expect(refused.granted).toBe(false)
    expect(refused.waitMs).toBe(Math.ceil(1 / plan.rate.refresh))
    expect(take(refused.state, plan, "refresh", refused.waitMs).granted).toBe(true)
  })

  it("counts the calendar month's spend and starts again at the next", () => {
    const plan = planFor(10_000)
    const lastMinute = Date.parse("2026-11-30T23:59:00Z")
    const taken = take({ cold: 10, refresh: 10, at: lastMinute, month: "2026-11", spent: 9_000 }, plan, "cold", lastMinute)
    expect(taken.state.spent).toBe(9_001)
    expect(settle(taken.state, plan, lastMinute + 2 * MINUTE)).toMatchObject({ month: "2026-12", spent: 0 })
  })

  it("gives nothing back when the clock goes back", () => {
    const plan = planFor(10_000)
    const state: CreditState = { cold: 1, refresh: 1, at: 10 * DAY, month: "1970-01", spent: 0 }
    expect(settle(state, plan, 9 * DAY)).toMatchObject({ cold: 1, refresh: 1, at: 10 * DAY })
  })

  it("reads back only what it wrote", () => {
    expect(parseState(JSON.stringify({ cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4 }))).toEqual({ cold: 1, refresh: 2, at: 3, month: "2026-11", spent: 4 })
    for (const text of ["", "null", "{}", "[1]", "{\"cold\":\"1\",\"refresh\":2,\"at\":3,\"month\":\"x\",\"spent\":0}", "not json"]) {
      expect(parseState(text)).toBeUndefined()
    }
  })
})
