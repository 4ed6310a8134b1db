/**
 * Issue 32, done when: ticks that no longer read while heartbeats go on (the feed writes its decimals as
 * JSON numbers; the connection stays up and heard from every second) for LIVE_FAULT_SECONDS (40 by default;
 * 120 for the issue's two minutes), then readable again. The scenario and its bounds: rates-live-fault.ts
 * (the majors' prices at most 60 s old from REST tickers within 10 calls a second, the feed again after).
 *
 * Before (ae86018) a pair stayed live on heartbeats alone: BTC's price was as old as the fault, and never
 * fell back to REST.
 */
import { afterAll, beforeAll, describe, it } from "vitest"
import { feedDownScenario } from "./rates-live-fault.ts"
import { type LiveRig, startLiveRig } from "./rates-live-support.ts"

let rig: LiveRig
beforeAll(async () => {
  rig = await startLiveRig({ instances: 2, redis: true, metrics: true })
}, 90_000)
afterAll(() => rig?.close())

describe("issue 32, done when: ticks that no longer read while heartbeats go on", () => {
  it("two instances keep BTC/ETH/SOL at most 60 s old from REST tickers within 10 calls a second, and use the feed again once its ticks read", async () => {
    await feedDownScenario(rig, "unreadable ticks", () => rig.coinbase.setFeed("numeric-ticks"))
  }, 300_000)
})
