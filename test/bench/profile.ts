/**
 * Reading the service's V8 CPU profile (.cpuprofile, Chrome DevTools format, from `--cpu-prof`): self
 * time per function (name + file:line:column), the share per origin (src/, effect, node:, GC) and our
 * src/ functions by synchronous inclusive time, over the measured runs only, and per scenario.
 */
import { readFileSync } from "node:fs"
import { relative } from "node:path"
import { fileURLToPath } from "node:url"
import { lpad, ROOT, round } from "./common.ts"

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number; readonly columnNumber: number }
  readonly children?: ReadonlyArray<number>
}
interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

export interface HotSpot {
  readonly function: string
  readonly location: string
  readonly selfMs: number
  readonly selfPct: number
  readonly totalMs?: number
  readonly totalPct?: number
}

/** A measured run of the service, in monotonic µs (the clock of V8's profile timestamps). */
export interface ProfileWindow {
  readonly scenario: string
  readonly from: number
  readonly to: number
}

/** Monotonic microseconds: CLOCK_MONOTONIC on Linux, as V8's profiler uses. */
export const monoUs = () => Number(process.hrtime.bigint() / 1000n)

const shortUrl = (url: string) => {
  if (url === "") return ""
  let path = url.startsWith("file://") ? fileURLToPath(url) : url
  const nm = path.lastIndexOf("/node_modules/")
  if (nm !== -1) return path.slice(nm + "/node_modules/".length)
  if (path.startsWith(ROOT)) path = relative(ROOT, path)
  return path
}

const categoryOf = (name: string, url: string) => {
  if (url === "") return name.startsWith("(") ? name : "(native/V8)"
  if (url.startsWith("src/")) return "src/ (ours)"
  if (url.startsWith("effect/")) return "effect"
  if (url.startsWith("@effect/")) return url.split("/").slice(0, 2).join("/")
  if (url.startsWith("node:")) return "node: internals"
  return url.split("/")[0] ?? url
}

/**
 * Self time per function, inclusive time of our functions, time per origin. Only samples inside
 * `windows` count (the measured runs, not start-up, capture or warm-up) when they overlap the profile.
 * Inclusive time stops at Effect's fiber loop: it is only the synchronous part.
 */
const summarise = (profile: CpuProfile, stamps: ReadonlyArray<number>, windows: ReadonlyArray<ProfileWindow>, top: number) => {
  const byId = new Map(profile.nodes.map((n) => [n.id, n] as const))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const keyOf = (n: ProfileNode) => {
    const url = shortUrl(n.callFrame.url)
    return { name: n.callFrame.functionName || "(anonymous)", location: url === "" ? "" : `${url}:${n.callFrame.lineNumber + 1}:${n.callFrame.columnNumber + 1}`, url }
  }
  const self = new Map<string, { name: string; location: string; url: string; us: number }>()
  const total = new Map<string, number>()
  const byCategory = new Map<string, number>()
  let busyUs = 0
  let idleUs = 0
  const { samples } = profile
  const inWindow = (at: number) => windows.some((w) => at >= w.from && at <= w.to)
  const windowed = windows.length > 0 && stamps.some(inWindow)
  for (let i = 0; i < samples.length; i++) {
    if (windowed && !inWindow(stamps[i]!)) continue
    const us = (i + 1 < stamps.length ? stamps[i + 1]! : profile.endTime) - stamps[i]!
    const node = byId.get(samples[i]!)
    if (node === undefined || us <= 0) continue
    const k = keyOf(node)
    if (k.name === "(idle)") {
      idleUs += us
      continue
    }
    busyUs += us
    const id = `${k.name} ${k.location}`
    const entry = self.get(id) ?? { ...k, us: 0 }
    entry.us += us
    self.set(id, entry)
    const cat = categoryOf(k.name, k.url)
    byCategory.set(cat, (byCategory.get(cat) ?? 0) + us)
    // Inclusive time: each distinct function on the stack once.
    const seen = new Set<string>()
    for (let cur: number | undefined = node.id; cur !== undefined; cur = parent.get(cur)) {
      const kk = keyOf(byId.get(cur)!)
      const kid = `${kk.name} ${kk.location}`
      if (seen.has(kid)) continue
      seen.add(kid)
      total.set(kid, (total.get(kid) ?? 0) + us)
    }
  }
  const pct = (us: number) => round((100 * us) / Math.max(1, busyUs), 1)
  const topSelf: Array<HotSpot> = [...self.entries()].sort((a, b) => b[1].us - a[1].us).slice(0, top).map(([id, e]) => ({
    function: e.name,
    location: e.location,
    selfMs: round(e.us / 1000, 1),
    selfPct: pct(e.us),
    totalMs: round((total.get(id) ?? 0) / 1000, 1),
    totalPct: pct(total.get(id) ?? 0)
  }))
  const oursInclusive: Array<HotSpot> = [...total.entries()]
    .filter(([id]) => / src\//.test(id))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 20)
    .map(([id, us]) => {
      const e = self.get(id)
      const space = id.indexOf(" src/")
      return { function: id.slice(0, space), location: id.slice(space + 1), selfMs: round((e?.us ?? 0) / 1000, 1), selfPct: pct(e?.us ?? 0), totalMs: round(us / 1000, 1), totalPct: pct(us) }
    })
  const categories = [...byCategory.entries()].sort((a, b) => b[1] - a[1]).map(([category, us]) => ({ category, ms: round(us / 1000, 1), pct: pct(us) }))
  return {
    scope: windowed ? "measured runs only" : "whole service life (start-up included)",
    busyMs: round(busyUs / 1000, 1),
    idleMs: round(idleUs / 1000, 1),
    categories,
    topSelf,
    oursInclusive
  }
}

export type ProfileSummary = ReturnType<typeof summarise>

/** The whole of the measured runs, and each scenario's runs on its own when there are several. */
export const analyseProfile = (file: string, windows: ReadonlyArray<ProfileWindow>, top = 25) => {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile
  let t = profile.startTime
  const stamps = profile.timeDeltas.map((d) => (t += d))
  const scenarios = [...new Set(windows.map((w) => w.scenario))]
  return {
    file: relative(ROOT, file),
    windowsUs: windows,
    all: summarise(profile, stamps, windows, top),
    perScenario: scenarios.length < 2
      ? []
      : scenarios.map((scenario) => ({ scenario, ...summarise(profile, stamps, windows.filter((w) => w.scenario === scenario), top) }))
  }
}

const printSummary = (title: string, p: ProfileSummary, top: number, ours: number) => {
  const out: Array<string> = [`\n${title}: ${p.busyMs} ms busy, ${p.idleMs} ms idle (${p.scope})`]
  out.push(`by origin: ${p.categories.slice(0, 10).map((c) => `${c.category} ${c.pct}%`).join(", ")}`)
  out.push("", `top ${Math.min(top, p.topSelf.length)} by self time (% of busy):`, `${lpad("self ms", 9)}${lpad("self%", 7)}${lpad("total%", 8)}  function  location`)
  for (const h of p.topSelf.slice(0, top)) out.push(`${lpad(h.selfMs.toFixed(1), 9)}${lpad(h.selfPct.toFixed(1), 7)}${lpad((h.totalPct ?? 0).toFixed(1), 8)}  ${h.function}  ${h.location}`)
  out.push("", "our code (src/) by inclusive time:", `${lpad("total ms", 9)}${lpad("total%", 8)}${lpad("self%", 7)}  function  location`)
  for (const h of p.oursInclusive.slice(0, ours)) out.push(`${lpad((h.totalMs ?? 0).toFixed(1), 9)}${lpad((h.totalPct ?? 0).toFixed(1), 8)}${lpad(h.selfPct.toFixed(1), 7)}  ${h.function}  ${h.location}`)
  process.stdout.write(`${out.join("\n")}\n`)
}

export const printProfile = (p: ReturnType<typeof analyseProfile>) => {
  printSummary(`CPU profile ${p.file}, all measured runs`, p.all, 25, 20)
  for (const s of p.perScenario) printSummary(`CPU profile, scenario ${s.scenario}`, s, 15, 10)
}
