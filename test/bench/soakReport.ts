/** What a soak run found (soak.ts), and the report it prints. */
import type { SoakOptions } from "./soakOptions.ts"

export interface SoakSummary {
  readonly options: SoakOptions
  readonly requests: number
  readonly seconds: number
  readonly byStatus: Readonly<Record<string, number>>
  readonly byKind: Readonly<Record<string, number>>
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  /** After warm-up and at the end: read after a forced full GC. Peak: the highest 1 s sample. */
  readonly rssMb: { readonly idleBefore: number; readonly afterWarmup: number; readonly end: number; readonly peak: number }
  readonly heapUsedMb: { readonly afterWarmup: number; readonly end: number }
  readonly fds: { readonly idleBefore: number; readonly afterWarmup: number; readonly end: number; readonly idleAfter: number }
  readonly faultsApplied: ReadonlyArray<string>
  readonly subscriptions: { readonly accepted: number; readonly failed: number; readonly delivered: number }
  readonly exitCode: number | null
  readonly violations: ReadonlyArray<string>
  readonly violationCount: number
}

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!

export const formatSummary = (s: SoakSummary): string => {
  const statuses = Object.entries(s.byStatus).sort(([a], [b]) => Number(a) - Number(b)).map(([k, v]) => `${k}: ${v}`).join(", ")
  const kinds = Object.entries(s.byKind).map(([k, v]) => `${k}: ${v}`).join(", ")
  const mb = (x: number) => `${x.toFixed(1)} MB`
  return [
    `soak: ${s.requests} requests in ${s.seconds.toFixed(1)} s (${(s.requests / s.seconds).toFixed(0)}/s), ${s.options.concurrency} clients, provider ${s.options.provider}, seed ${s.options.seed}`,
    `  by status: ${statuses}`,
    `  by kind:   ${kinds}`,
    `  latency:   p50 ${s.p50Ms.toFixed(1)} ms, p99 ${s.p99Ms.toFixed(1)} ms, max ${s.maxMs.toFixed(0)} ms`,
    `  RSS:       ${mb(s.rssMb.idleBefore)} idle before; after a forced GC ${mb(s.rssMb.afterWarmup)} after warm-up, ${mb(s.rssMb.end)} at the end (tolerance +${s.options.rssToleranceMb} MB); peak ${mb(s.rssMb.peak)}`,
    `  heap used: after a forced GC ${mb(s.heapUsedMb.afterWarmup)} after warm-up, ${mb(s.heapUsedMb.end)} at the end (tolerance +${s.options.heapToleranceMb} MB)`,
    `  fds:       ${s.fds.idleBefore} idle before, ${s.fds.afterWarmup} after warm-up, ${s.fds.end} at the end, ${s.fds.idleAfter} idle after (tolerance +${s.options.fdTolerance})`,
    `  faults:    ${s.faultsApplied.length === 0 ? "none" : s.faultsApplied.join("; ")}`,
    `  subscriptions: ${s.subscriptions.accepted} accepted (200), ${s.subscriptions.delivered} delivered as accepted, ${s.subscriptions.failed} not accepted`,
    `  SIGTERM exit code: ${s.exitCode}`,
    s.violationCount === 0 ? "  verdict: OK" : `  verdict: ${s.violationCount} violation(s):\n    - ${s.violations.join("\n    - ")}`
  ].join("\n")
}
