/** What the benchmark reads of a process from Linux /proc: memory (VmRSS, VmHWM) and CPU time. */
import { spawnSync } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { loadavg } from "node:os"
import { mib, round } from "./common.ts"

export interface MemSample {
  readonly rssKiB: number
  readonly hwmKiB: number
}

export const readMem = (pid: number): MemSample | undefined => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const rss = /^VmRSS:\s+(\d+) kB/m.exec(status)
    const hwm = /^VmHWM:\s+(\d+) kB/m.exec(status)
    if (rss === null || hwm === null) return undefined
    return { rssKiB: Number(rss[1]), hwmKiB: Number(hwm[1]) }
  } catch {
    return undefined
  }
}

/** User + system CPU time of a process in ms (from /proc/PID/stat; clock ticks, usually 10 ms). */
export const cpuMs = (pid: number): number | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // Fields after the command name (which may contain spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS
  } catch {
    return undefined
  }
}
const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100

/**
 * Time a process's main thread spent runnable but waiting for a CPU, in ms (/proc/PID/schedstat's second field):
 * on a shared machine, what other work took from it.
 */
export const runQueueWaitMs = (pid: number): number | undefined => {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[1]) / 1e6
  } catch {
    return undefined
  }
}

export const loadAverage = () => round(loadavg()[0] ?? 0, 2)

/** Resets VmHWM to the current RSS (Linux >= 4.0; needs the right to write clear_refs). */
export const resetPeak = (pid: number) => {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5")
    return true
  } catch {
    return false
  }
}

export class RssSampler {
  private peakKiB = 0
  private timer: NodeJS.Timeout | undefined
  readonly timeline: Array<readonly [seconds: number, rssMiB: number]> = []
  private readonly t0 = performance.now()
  private lastTimeline = -Infinity
  private readonly pid: number
  private readonly timelineEverySec: number
  constructor(pid: number, timelineEverySec = 0) {
    this.pid = pid
    this.timelineEverySec = timelineEverySec
  }
  start() {
    this.sample()
    this.timer = setInterval(() => this.sample(), 100)
    return this
  }
  private sample() {
    const mem = readMem(this.pid)
    if (mem === undefined) return
    this.peakKiB = Math.max(this.peakKiB, mem.rssKiB)
    const t = (performance.now() - this.t0) / 1000
    if (this.timelineEverySec > 0 && t - this.lastTimeline >= this.timelineEverySec) {
      this.lastTimeline = t
      this.timeline.push([round(t, 1), mib(mem.rssKiB)])
    }
  }
  /** Peak of polled VmRSS and of VmHWM (which catches spikes between polls when it was reset). */
  stop(hwmWasReset: boolean): number {
    this.sample()
    if (this.timer !== undefined) clearInterval(this.timer)
    const mem = readMem(this.pid)
    return Math.max(this.peakKiB, hwmWasReset && mem !== undefined ? mem.hwmKiB : 0)
  }
}
