/**
 * Issue 28, done when (2), the feed going silent: connections stay open and nothing comes on them (no
 * tick, heartbeat or pong; new connections accepted and silent too) for 40 s, then back. The scenario
 * and its bounds: rates-live-fault.ts.
 */
import { afterAll, beforeAll, describe, it } from "vitest"
import { feedDownScenario } from "./rates-live-fault.ts"
import { type LiveRig, startLiveRig } from "./rates-live-support.ts"

let rig: LiveRig
beforeAll(async () => {
  rig = await startLiveRig({ instances: 2, redis: true, metrics: true })
}, 90_000)
afterAll(() => rig?.close())

describe("issue 28, done when (2): the feed going silent", () => {
  it("two instances keep BTC/ETH/SOL at most 60 s old from REST tickers within 10 calls a second, and use the feed again within a minute", async () => {
    await feedDownScenario(rig, "silent", () => rig.coinbase.setFeed("silent"))
  }, 150_000)
})
