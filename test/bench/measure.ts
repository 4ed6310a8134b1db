/** One measured run of one scenario on one server: warm-up, then wrk, with the server's CPU time and RSS. */
import { mib, round } from "./common.ts"
import type { Options } from "./options.ts"
import { monoUs } from "./profile.ts"
import { type Measured, statusCheck } from "./report.ts"
import type { ScenarioDef } from "./scenarios.ts"
import type { Server } from "./servers.ts"
import { cpuMs, loadAverage, readMem, resetPeak, RssSampler } from "./system.ts"
import { runWrk } from "./wrk.ts"

/** `measured`: told the monotonic window of the measured run (bench.ts cuts a CPU profile to it). */
export const measure = async (
  opts: Options,
  tmp: string,
  server: Server,
  scenario: ScenarioDef,
  measured?: (from: number, to: number) => void
): Promise<Measured> => {
  const pid = server.child.pid!
  const rssBefore = readMem(pid)?.rssKiB ?? 0
  const reset = resetPeak(pid)
  const sampler = new RssSampler(pid).start()
  if (opts.warmup > 0) await runWrk(opts, tmp, { port: server.port, scenarios: [scenario], seconds: opts.warmup })
  const load = loadAverage()
  const cpu0 = cpuMs(pid) ?? 0
  const from = monoUs()
  const wrk = await runWrk(opts, tmp, { port: server.port, scenarios: [scenario], seconds: opts.duration })
  measured?.(from, monoUs())
  const cpu = (cpuMs(pid) ?? 0) - cpu0
  const peak = sampler.stop(reset)
  return {
    wrk,
    peakRssMiB: mib(peak),
    rssBeforeMiB: mib(rssBefore),
    cpuUsPerRequest: round((cpu * 1000) / Math.max(1, wrk.requests), 1),
    cpuUtilisation: round(cpu / 1000 / wrk.durationSec, 2),
    loadAverage1m: load,
    statusCheck: statusCheck(scenario, wrk)
  }
}
