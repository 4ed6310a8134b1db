/**
 * Issue 28, done when (2), the feed refusing connections: every connection closed and new ones refused
 * (503) for 40 s, then back. The scenario and its bounds: rates-live-fault.ts.
 */
import { afterAll, beforeAll, describe, it } from "vitest"
import { feedDownScenario } from "./rates-live-fault.ts"
import { type LiveRig, startLiveRig } from "./rates-live-support.ts"

let rig: LiveRig
beforeAll(async () => {
  rig = await startLiveRig({ instances: 2, redis: true, metrics: true })
}, 90_000)
afterAll(() => rig?.close())

describe("issue 28, done when (2): the feed refusing connections", () => {
  it("two instances keep BTC/ETH/SOL at most 60 s old from REST tickers within 10 calls a second, and use the feed again within a minute", async () => {
    await feedDownScenario(rig, "refused", () => {
      // Refuse first, so that the reconnects after the cut are refused too.
      rig.coinbase.setFeed("refuse")
      rig.coinbase.setFeed("disconnect")
    })
  }, 150_000)
})
