/**
 * The upstream faults of a soak run (soak.ts): none during warm-up, then, every fault period until the end of the
 * duration, alternately the next fault of the cycle (CoinGecko's and Brevo's in turn; Brevo's only with that
 * provider) and none.
 */
import type { BrevoEmulator } from "../emulators/brevo.ts"
import type { CoinGeckoEmulator } from "../emulators/coingecko.ts"
import type { Fault as NewsletterFault } from "../emulators/newsletter-kit.ts"
import type { SoakOptions } from "./soakOptions.ts"

export interface FaultSchedule {
  /** Each fault switched on: `<second>s <name>`. */
  readonly faultsApplied: ReadonlyArray<string>
  /** Switches every fault off. */
  readonly faultsOff: () => void
  /** Stops switching. */
  readonly stop: () => void
}

/** Starts switching faults by `elapsedS`; `afterWarmup` is called on every check (each 200 ms) past warm-up. */
export const scheduleFaults = ({ afterWarmup, brevo, coingecko, elapsedS, log, options }: {
  readonly options: SoakOptions
  readonly coingecko: CoinGeckoEmulator
  readonly brevo: BrevoEmulator
  readonly elapsedS: () => number
  readonly log: (line: string) => void
  readonly afterWarmup: () => void
}): FaultSchedule => {
  const allFaults: ReadonlyArray<readonly [string, () => void]> = [
    ["coingecko 5xx", () => coingecko.setFault("5xx")],
    ["brevo 500", () => brevo.setFault("500")],
    ["coingecko hang", () => coingecko.setFault("hang")],
    ["brevo hang", () => brevo.setFault("hang")],
    ["coingecko 429 (Retry-After 2)", () => coingecko.setFault({ mode: "429", retryAfterSeconds: 2 })],
    ["brevo reset", () => brevo.setFault("reset")],
    ["coingecko truncated", () => coingecko.setFault("truncated")],
    ["brevo 429", () => brevo.setFault("429")],
    ["coingecko reset", () => coingecko.setFault("reset")],
    ["brevo garbage", () => brevo.setFault("garbage")],
    ["coingecko wrong-shape", () => coingecko.setFault("wrong-shape")],
    ["brevo slow 2 s", () => brevo.setFault({ mode: "slow", delayMs: 2_000 } satisfies NewsletterFault)],
    ["coingecko 401", () => coingecko.setFault("401")]
  ]
  const cycle = allFaults.filter(([name]) => options.provider === "brevo" || !name.startsWith("brevo"))
  const faultsOff = () => {
    coingecko.setFault("none")
    brevo.setFault("none")
  }
  const faultsApplied: Array<string> = []

  let phase = -1
  const scheduler = setInterval(() => {
    const t = elapsedS()
    if (t < options.warmupS || t >= options.durationS) return
    afterWarmup()
    const current = Math.floor((t - options.warmupS) / options.faultPeriodS)
    if (current === phase) return
    phase = current
    if (phase % 2 === 0 || cycle.length === 0) return faultsOff()
    const [name, apply] = cycle[Math.floor(phase / 2) % cycle.length]!
    faultsOff()
    apply()
    faultsApplied.push(`${Math.round(t)}s ${name}`)
    log(`[soak] ${Math.round(t)}s fault on: ${name}`)
  }, 200)
  return { faultsApplied, faultsOff, stop: () => clearInterval(scheduler) }
}
