/**
 * Time as a service running in the test's process spends it: the wall clock less what the process was held up (a
 * starved machine, or another file's synchronous work in the same worker), measured by the event loop's delay. A bound
 * on how long the service takes is put on this; a wait it must make is bounded below on the wall clock, which a busy
 * machine only lengthens.
 */
import { monitorEventLoopDelay } from "node:perf_hooks"
import { Effect } from "effect"

const RESOLUTION_MS = 10

/** Starts measuring; the function returned stops and says how many milliseconds the process could not run. */
export const measureStalls = (): (() => number) => {
  const delays = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  delays.enable()
  return () => {
    delays.disable()
    // Each sample is the time between two ticks RESOLUTION_MS apart: what passes RESOLUTION_MS is a stall.
    return delays.count === 0 ? 0 : Math.max(0, (delays.mean * delays.count) / 1e6 - delays.count * RESOLUTION_MS)
  }
}

/** Runs `effect`: its result, the wall time it took and the service's own time (ms). */
export const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const stalled = measureStalls()
    const started = Date.now()
    const result = yield* Effect.result(effect)
    const elapsedMs = Date.now() - started
    return { result, elapsedMs, ownMs: Math.max(0, Math.round(elapsedMs - stalled())) }
  })
