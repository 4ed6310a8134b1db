/** The soak's options (soak.ts), their defaults, and how `npm run soak -- --flag value` sets them. */

export interface SoakOptions {
  readonly durationS: number
  readonly warmupS: number
  readonly concurrency: number
  readonly provider: "brevo" | "local"
  readonly faultPeriodS: number
  /** Allowed growth of RSS, read after a forced full GC, between the end of warm-up and the end. */
  readonly rssToleranceMb: number
  /** Allowed growth of the V8 heap in use after a forced full GC over the same span. */
  readonly heapToleranceMb: number
  readonly fdTolerance: number
  readonly seed: number
  /** Requests the run makes at least, going on past `durationS` (at most 4 times it) on a busy machine; absent: none. */
  readonly minRequests?: number
  /** Progress lines (default: stderr). */
  readonly log?: (line: string) => void
}

export const defaultSoakOptions: SoakOptions = {
  durationS: 120,
  warmupS: 30,
  concurrency: 8,
  provider: "brevo",
  faultPeriodS: 10,
  rssToleranceMb: 40,
  heapToleranceMb: 16,
  fdTolerance: 16,
  seed: 1
}

/** `--duration 180 --warmup=30 …` as options; throws on an unknown flag or a bad value. */
export const parseSoakArgs = (argv: ReadonlyArray<string>): Partial<SoakOptions> => {
  const out: Record<string, unknown> = {}
  const names: Record<string, keyof SoakOptions> = {
    "--duration": "durationS",
    "--warmup": "warmupS",
    "--concurrency": "concurrency",
    "--provider": "provider",
    "--fault-period": "faultPeriodS",
    "--rss-tolerance-mb": "rssToleranceMb",
    "--heap-tolerance-mb": "heapToleranceMb",
    "--fd-tolerance": "fdTolerance",
    "--seed": "seed"
  }
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split("=", 2) as [string, string | undefined]
    const key = names[flag]
    if (key === undefined) throw new Error(`unknown option ${flag}; known: ${Object.keys(names).join(" ")}`)
    const value = inline ?? argv[++i]
    if (value === undefined) throw new Error(`${flag} needs a value`)
    if (key === "provider") {
      if (value !== "brevo" && value !== "local") throw new Error("--provider must be brevo or local")
      out[key] = value
    } else {
      const n = Number(value)
      if (!Number.isFinite(n) || n < 0) throw new Error(`${flag} must be a non-negative number`)
      out[key] = n
    }
  }
  // A short run gets a proportionally short warm-up unless one is given. V8 keeps growing its heap
  // for about half a minute under load, so RSS verdicts of runs much shorter than 120 s are noisy.
  if (out.durationS !== undefined && out.warmupS === undefined) out.warmupS = Math.min(30, Math.max(3, Math.round((out.durationS as number) / 4)))
  return out as Partial<SoakOptions>
}
