/** The stream mode's results (streamMode.ts): a level's figures on one server, the table, the ratios service/raw, the goal. */
import { fmtInt, round } from "./common.ts"

/** The service, or the raw `node:http` baseline (streamRaw.ts) measured in the same invocation. */
export type ServerKind = "service" | "raw"

/** One level on one server (streamLevels.ts): counts over its window, or since the level before. */
export interface StreamLevel {
  readonly server: ServerKind
  readonly asked: number
  readonly held: number
  readonly openSeconds: number
  readonly windowSeconds: number
  readonly events: number
  readonly eventsPerSecond: number
  /** Trades the feed made of the three pairs a second (a late emulator makes fewer than 2 a second each). */
  readonly ticksPerSecond: number
  readonly idealPerSecond: number
  readonly lagMs: { readonly p50: number; readonly p99: number; readonly max: number }
  readonly snapshots: number
  readonly heartbeats: number
  readonly idsOutOfOrder: number
  readonly readerLoopDelayMs: { readonly p99: number; readonly max: number }
  readonly readersRunQueueWait: number
  readonly serverCpuCores: number
  readonly serverRunQueueWait: number
  readonly readersCpuCores: number
  readonly emulatorsCpuCores: number
  readonly rssMiB: number
  readonly rssAboveIdleMiB: number
  readonly peakRssAboveIdleMiB: number
  readonly closedByServer: number
  readonly unserved: number
  readonly refused: Readonly<Record<string, number>>
  readonly coinGeckoCalls: number
  /** The service's own counts: streams open at the window's end, events written a second, closed for lagging since its start (none for raw). */
  readonly hub: { readonly open: number; readonly eventsPerSecond: number; readonly closedLagging: number } | undefined
  readonly loadAverage1m: number
}

/** Per level: the service's figure over the raw server's, for RSS above idle (end, peak) and CPU. */
export const ratios = (rows: ReadonlyArray<StreamLevel>) =>
  rows.filter((r) => r.server === "service").flatMap((s) => {
    const raw = rows.find((r) => r.server === "raw" && r.asked === s.asked)
    if (raw === undefined) return []
    const over = (a: number, b: number) => (b > 0 ? round(a / b, 2) : null)
    return [{
      asked: s.asked,
      rssAboveIdle: over(s.rssAboveIdleMiB, raw.rssAboveIdleMiB),
      peakRssAboveIdle: over(s.peakRssAboveIdleMiB, raw.peakRssAboveIdleMiB),
      cpu: over(s.serverCpuCores, raw.serverCpuCores),
      lagMs: { service: s.lagMs, raw: raw.lagMs }
    }]
  })

const printTable = (header: ReadonlyArray<string>, table: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = header.map((h, c) => Math.max(h.length, ...table.map((r) => r[c]!.length)))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.map((cell, c) => cell.padEnd(widths[c]!)).join(" | ")} |\n`
  process.stdout.write(`\n${line(header)}${line(widths.map((w) => "-".repeat(w)))}${table.map(line).join("")}`)
}

export const printStreamTable = (
  rows: ReadonlyArray<StreamLevel>,
  o: {
    readonly notes: string
    readonly afterClose: Readonly<Record<ServerKind, { readonly open: number | undefined; readonly rssAboveIdleMiB: number }>>
    readonly goal: { readonly streams: number; readonly lagP99Ms: number; readonly rssAboveIdleMB: number }
  }
) => {
  printTable(
    ["server", "streams asked", "held", "events/s (ideal)", "lag p50 / p99 / max ms", "server CPU (waited)", "RSS above idle MiB (end, peak)", "closed by server", "unserved", "CoinGecko calls", "readers CPU (waited; loop delay p99, max ms)", "load"],
    rows.map((r) => [
      r.server,
      fmtInt(r.asked),
      `${fmtInt(r.held)} (${round((100 * r.held) / r.asked, 1)} %)`,
      `${fmtInt(r.eventsPerSecond)} (${fmtInt(r.idealPerSecond)})`,
      `${r.lagMs.p50} / ${r.lagMs.p99} / ${r.lagMs.max}`,
      `${r.serverCpuCores.toFixed(2)} (${r.serverRunQueueWait.toFixed(2)})`,
      `${r.rssAboveIdleMiB} (${r.peakRssAboveIdleMiB})`,
      fmtInt(r.closedByServer),
      r.unserved === 0 ? "0" : `${fmtInt(r.unserved)} ${JSON.stringify(r.refused)}`,
      fmtInt(r.coinGeckoCalls),
      `${r.readersCpuCores.toFixed(2)} (${r.readersRunQueueWait.toFixed(2)}; ${r.readerLoopDelayMs.p99}, ${r.readerLoopDelayMs.max})`,
      r.loadAverage1m.toFixed(2)
    ])
  )
  process.stdout.write(`${o.notes}\n`)
  const x = (n: number | null) => (n === null ? "-" : `${n.toFixed(2)}×`)
  printTable(
    ["streams", "RSS above idle service/raw (end, peak)", "CPU service/raw", "lag p50 / p99 ms service", "lag p50 / p99 ms raw"],
    ratios(rows).map((r) => [fmtInt(r.asked), `${x(r.rssAboveIdle)} (${x(r.peakRssAboveIdle)})`, x(r.cpu), `${r.lagMs.service.p50} / ${r.lagMs.service.p99}`, `${r.lagMs.raw.p50} / ${r.lagMs.raw.p99}`])
  )
  const service = rows.filter((r) => r.server === "service")
  process.stdout.write(
    `the service's own counts (metrics): ${service.map((r) => `${fmtInt(r.asked)}: ${fmtInt(r.hub?.open ?? 0)} open, ${fmtInt(r.hub?.eventsPerSecond ?? 0)} events written/s, ${r.hub?.closedLagging ?? 0} closed for lagging`).join("; ")}; ` +
      `5 s after every stream closed: service ${o.afterClose.service.open} open, RSS ${o.afterClose.service.rssAboveIdleMiB} MiB above idle; raw RSS ${o.afterClose.raw.rssAboveIdleMiB} MiB above idle\n`
  )
  const { goal } = o
  const top = service.find((r) => r.asked === goal.streams)
  if (top === undefined) return void process.stdout.write(`goal (${fmtInt(goal.streams)} held, lag p99 ≤ ${goal.lagP99Ms} ms, RSS ≤ ${goal.rssAboveIdleMB} MB above idle): not measured (no ${fmtInt(goal.streams)} level)\n`)
  const rssMB = round((top.peakRssAboveIdleMiB * 1_048_576) / 1e6, 1)
  const checks = [
    [`${fmtInt(top.held)} of ${fmtInt(goal.streams)} held`, top.held === goal.streams],
    [`lag p99 ${top.lagMs.p99} ms ≤ ${goal.lagP99Ms}`, top.lagMs.p99 <= goal.lagP99Ms],
    [`peak RSS ${rssMB} MB above idle ≤ ${goal.rssAboveIdleMB}`, rssMB <= goal.rssAboveIdleMB]
  ] as const
  process.stdout.write(`goal (the service): ${checks.map(([text, ok]) => `${text} ${ok ? "ok" : "MISSED"}`).join("; ")} → ${checks.every(([, ok]) => ok) ? "met" : "NOT met"}\n`)
}
