/**
 * The sweep of temp files at start-up (src/platform/files.ts `sweepTempFiles`): writeFileAtomic's own temp
 * files older than the age given are removed at any depth under DATA_DIR; a younger one (a write in
 * progress), any other file, and anything reached through a symbolic link are left alone.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { sweepTempFiles } from "../../../src/platform/files.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})
const tempDir = (prefix: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

const MINUTE = 60_000
/** Writes `file` (folders made), last changed `ageMs` ago. */
const put = (file: string, ageMs: number) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, "left over")
  const at = new Date(Date.now() - ageMs)
  fs.utimesSync(file, at, at)
  return file
}
const sweep = (dir: string) => Effect.runPromise(sweepTempFiles(dir, MINUTE))

describe("sweeping temp files left under DATA_DIR", () => {
  it("removes writeFileAtomic's temp files older than a minute, at any depth, and nothing else", async () => {
    const dataDir = tempDir("sweep-")
    const crashed = [
      put(path.join(dataDir, "state", "coingecko-credits.json.4242.0123456789ab.tmp"), 2 * MINUTE),
      put(path.join(dataDir, "rates-history", "coinbase", "usd", "bitcoin.json.77.a1b2c3d4e5f6.tmp"), 3 * MINUTE),
      put(path.join(dataDir, "oauth", "clients.json.1.ffffffffffff.tmp"), 60 * MINUTE)
    ]
    const kept = [
      // A write in progress.
      put(path.join(dataDir, "state", "coingecko-credits.json.4243.0123456789ab.tmp"), 10_000),
      // Not writeFileAtomic's: an operator's, another program's.
      put(path.join(dataDir, "notes.tmp"), 60 * MINUTE),
      put(path.join(dataDir, "state", "coingecko-credits.json"), 60 * MINUTE),
      put(path.join(dataDir, "oauth", "clients.json.pid.0123456789ab.tmp"), 60 * MINUTE),
      put(path.join(dataDir, "oauth", "clients.json.12.0123456789AB.tmp"), 60 * MINUTE)
    ]
    expect(await sweep(dataDir)).toBe(3)
    for (const file of crashed) expect(fs.existsSync(file), file).toBe(false)
    for (const file of kept) expect(fs.existsSync(file), file).toBe(true)
    expect(await sweep(dataDir)).toBe(0)
  })

  it("never follows a symbolic link out of DATA_DIR, nor removes one", async () => {
    const dataDir = tempDir("sweep-")
    const elsewhere = tempDir("sweep-elsewhere-")
    const outside = put(path.join(elsewhere, "state", "x.json.9.0123456789ab.tmp"), 60 * MINUTE)
    fs.symlinkSync(path.join(elsewhere, "state"), path.join(dataDir, "linked-folder"))
    const link = path.join(dataDir, "y.json.9.0123456789ab.tmp")
    fs.symlinkSync(outside, link)
    expect(await sweep(dataDir)).toBe(0)
    expect(fs.existsSync(outside)).toBe(true)
    expect(fs.lstatSync(link).isSymbolicLink()).toBe(true)
  })

  it("a DATA_DIR that does not exist yet, or is a file, has nothing to sweep", async () => {
    const parent = tempDir("sweep-")
    expect(await sweep(path.join(parent, "not-yet"))).toBe(0)
    expect(await sweep(put(path.join(parent, "a-file"), 0))).toBe(0)
  })
})
