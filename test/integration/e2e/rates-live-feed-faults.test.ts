/**
 * The feed's faults, each for LIVE_FAULT_SECONDS (40 by default; 120 for issue 32's two minutes), then over
 * (the scenario and its bounds: rates-live-fault.ts). Each fault has a rig of its own (two spawned services
 * on a private Redis, its own emulators: its own Coinbase rate-limit bucket), and the three run side by
 * side: most of their time is waiting on the clock, so one after another tripled `npm test`'s share of it.
 *   - refused (issue 28, done when (2)): every connection closed and new ones refused (503);
 *   - silent (issue 28): connections stay open and nothing comes on them (no tick, heartbeat or pong; new
 *     connections accepted and silent too);
 *   - unreadable ticks (issue 32, done when): the feed writes its decimals as JSON numbers while heartbeats
 *     go on, the connection up and heard from every second. Before (ae86018) a pair stayed live on
 *     heartbeats alone: BTC's price was as old as the fault, and never fell back to REST.
 */
import { afterAll, beforeAll, describe, it } from "vitest"
import { feedDownScenario } from "./rates-live-fault.ts"
import { type LiveRig, startLiveRig } from "./rates-live-support.ts"

const faults: ReadonlyArray<readonly [label: string, start: (rig: LiveRig) => void]> = [
  ["refused", (rig) => {
    // Refuse first, so that the reconnects after the cut are refused too.
    rig.coinbase.setFeed("refuse")
    rig.coinbase.setFeed("disconnect")
  }],
  ["silent", (rig) => rig.coinbase.setFeed("silent")],
  ["unreadable ticks", (rig) => rig.coinbase.setFeed("numeric-ticks")]
]

const rigs = new Map<string, LiveRig>()
beforeAll(async () => {
  // One after another: each rig picks free ports, which two starting at once could both pick.
  for (const [label] of faults) rigs.set(label, await startLiveRig({ instances: 2, redis: true, metrics: true }))
}, 180_000)
afterAll(() => Promise.all([...rigs.values()].map((rig) => rig.close())))

describe.concurrent("the feed down three ways, side by side", () => {
  for (const [label, start] of faults) {
    it(`${label}: two instances keep BTC/ETH/SOL at most 60 s old from REST tickers within 10 calls a second, and use the feed again within a minute`, async () => {
      const rig = rigs.get(label)!
      await feedDownScenario(rig, label, () => start(rig))
    }, 300_000)
  }
})
