/**
 * The soak of scripts/soak.ts, short enough for CI: the real service process against the emulators,
 * mixed traffic with upstream faults switched on and off, then the same verdicts as the long run.
 *
 * Twelve seconds cannot tell a slow leak from heap growth after start-up (V8 grows the heap for a
 * while before it collects in earnest), so the RSS tolerance here only catches gross leaks; the long
 * run (`npm run soak -- --duration 180`) uses the tight default. Descriptors, invariants, deliveries
 * and the SIGTERM exit code are held to the same standard as the long run.
 */
import { describe, expect, it } from "vitest"
import { formatSummary, runSoak } from "../../scripts/soak.ts"

describe("soak (short)", () => {
  it("12 s of mixed traffic under switching faults: invariants hold, nothing leaks, every accepted subscription is delivered", async () => {
    const summary = await runSoak({
      durationS: 12,
      warmupS: 4,
      faultPeriodS: 2,
      concurrency: 4,
      rssToleranceMb: 150,
      fdTolerance: 16,
      seed: 7,
      log: () => {}
    })
    console.log(formatSummary(summary))
    expect(summary.violations).toEqual([])
    // The run must have exercised what it claims to check.
    expect(summary.requests).toBeGreaterThan(500)
    expect(summary.subscriptions.accepted).toBeGreaterThan(20)
    expect(summary.faultsApplied.length).toBeGreaterThanOrEqual(2)
    expect(Object.keys(summary.byStatus)).toEqual(expect.arrayContaining(["200", "400", "401", "404", "405", "413", "415"]))
    expect(summary.exitCode).toBe(0)
  }, 90_000)
})
