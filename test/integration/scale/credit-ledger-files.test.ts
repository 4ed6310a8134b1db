/**
 * The month's credits kept in files (DATA_DIR/state, no Redis nor PostgreSQL), with two real processes on
 * the one directory, as a rolling deploy or replicas sharing a volume run: their compare-and-sets must
 * exclude each other across processes, so that together they spend at most one reserve.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { tempDataDir } from "../../support/spawn.ts"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const SPENDER = join(ROOT, "test/integration/scale/fixtures/credit-spender.ts")

/** A spender process: resolves `ready` once its ledger is open, `done` with what it printed last. */
const spender = (stateDir: string) => {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [SPENDER, stateDir, "1000", "40"], { cwd: ROOT })
  let stdout = ""
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const ready = new Promise<void>((resolveReady, reject) => {
    child.stdout.on("data", (chunk) => {
      stdout += chunk
      if (stdout.includes("ready\n")) resolveReady()
    })
    child.once("exit", (code) => reject(new Error(`exited with ${code} before ready: ${stderr}`)))
  })
  const done = new Promise<{ readonly granted: number }>((resolveDone, reject) => {
    child.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`exited with ${code}: ${stderr}`))
      resolveDone(JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as { granted: number })
    })
  })
  // Awaited after `ready`: a process failing before that is reported once, by `ready`.
  done.catch(() => undefined)
  return { child, ready, done }
}

describe("the month's credits in files shared by two processes", () => {
  it("racing from the same instant, they spend one reserve at most, every credit counted", async () => {
    const stateDir = join(tempDataDir(), "state")
    const spenders = [spender(stateDir), spender(stateDir)]
    try {
      await Promise.all(spenders.map((s) => s.ready))
      for (const s of spenders) s.child.stdin.end("go\n")
      const granted = (await Promise.all(spenders.map((s) => s.done))).reduce((sum, { granted }) => sum + granted, 0)
      // Plan 1,000: a reserve of 20, of which 10.5 for cold calls (credits coming back meanwhile: far under one).
      expect(granted).toBeLessThanOrEqual(10)
      expect(granted).toBeGreaterThan(0)
      const ledger = JSON.parse(readFileSync(join(stateDir, "coingecko-credits.json"), "utf8")) as { spent: number }
      expect(ledger.spent).toBe(granted)
    } finally {
      for (const s of spenders) s.child.kill("SIGKILL")
    }
  }, 60_000)
})
