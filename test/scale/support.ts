/** Private servers for outage tests (never the shared ones): a redis-server and a PostgreSQL cluster. */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { freePort } from "../support/spawn.ts"

const run = promisify(execFile)

/** A redis-server on a free port, without persistence; `stop` kills it, `start` brings it back empty. */
export const startRedis = async () => {
  const port = await freePort()
  let child: ChildProcess | undefined
  const start = async () => {
    const started = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    child = started
    await new Promise<void>((resolve, reject) => {
      let out = ""
      const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${out}`)), 10_000)
      started.stdout!.on("data", (c) => {
        out += c
        if (out.includes("Ready to accept connections")) {
          clearTimeout(timer)
          resolve()
        }
      })
    })
  }
  const stop = async () => {
    const current = child
    child = undefined
    if (current === undefined || current.exitCode !== null) return
    const exited = new Promise((r) => current.once("exit", r))
    current.kill("SIGKILL")
    await exited
  }
  await start()
  return { url: `redis://127.0.0.1:${port}`, port, start, stop }
}

/** PostgreSQL's server programs (initdb, pg_ctl), from Debian's /usr/lib/postgresql/<version>/bin. */
const pgBin = (name: string) => {
  const root = "/usr/lib/postgresql"
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  for (const v of versions) {
    const path = join(root, v, "bin", name)
    if (existsSync(path)) return path
  }
  return name
}

/**
 * A throw-away PostgreSQL cluster in a temp directory on a free port (trust auth, database `postgres`),
 * which a test may stop and start again; `remove` stops it and deletes its files.
 */
export const startPostgres = async () => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), "crypto-api-pg-"))
  const data = join(dir, "data")
  await run(pgBin("initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
  const start = () =>
    run(pgBin("pg_ctl"), [
      "-D", data, "-l", join(dir, "log"), "-w", "-t", "30",
      "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
      "start"
    ]).then(() => undefined)
  const stop = () => run(pgBin("pg_ctl"), ["-D", data, "-m", "fast", "-w", "stop"]).then(() => undefined)
  await start()
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop,
    remove: async () => {
      await stop().catch(() => undefined)
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
