/**
 * Start-up failures as an operator meets them (issue 15, C9): each is one message on stderr naming
 * what to fix, no stack trace, exit 1, within seconds. Redis away at start-up is not a failure: the
 * service starts without it, says so, and uses it once it answers. What interrupted writes left under
 * DATA_DIR is swept at start-up.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { dirname, join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { redisCommand, startRedis, startRedisOnFreePort } from "../../support/redis.ts"
import { childEnv, freePort, type ServiceProcess, spawnService, tempDataDir, unprivileged, unprivilegedCanRunNode } from "../../support/spawn.ts"

const running: Array<ServiceProcess> = []
const redises: Array<ChildProcess> = []
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop("SIGKILL")))
  for (const r of redises) r.kill("SIGKILL")
})

interface Failed {
  readonly code: number | null
  readonly stderr: string
  /** The CPU time the process used, as last read before it exited: its own time, whatever the machine's load. */
  readonly cpuMs: number
}

/** CPU time a running process has used (user and system), from /proc; undefined once it is gone. */
const cpuMsOf = (pid: number): number | undefined => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS
  } catch {
    return undefined
  }
}
/** Linux's USER_HZ, what /proc counts CPU time in. */
const CLOCK_TICKS = 100
/** A start-up that has used no CPU for this long, and not exited, waits on nothing that will come: it hangs. */
const IDLE_MS = 5_000
/** A start-up that has run this long has hung even if it spins (a busy machine stretches seconds, not minutes). */
const RUNNING_AT_MOST_MS = 60_000

/**
 * Starts `node src/main.ts`, expecting it to exit; stderr apart from the JSON log on stdout. It hangs when it has used
 * no CPU for IDLE_MS, or runs for RUNNING_AT_MOST_MS: a starved machine slows a start-up down but never stops it.
 */
const startFailing = (env: Record<string, string>, options: { uid?: number; gid?: number } = {}) =>
  new Promise<Failed>((resolve, reject) => {
    const started = Date.now()
    const child = spawn(process.execPath, ["src/main.ts"], {
      env: { ...childEnv, HOST: "127.0.0.1", PORT: "0", DATA_DIR: tempDataDir(), COINGECKO_BASE_URL: "http://127.0.0.1:9/unused", COINBASE_BASE_URL: "http://127.0.0.1:9/unused", ...env },
      stdio: ["ignore", "pipe", "pipe"],
      ...options
    })
    let stderr = ""
    let stdout = ""
    child.stdout.on("data", (c) => (stdout += c))
    child.stderr.on("data", (c) => (stderr += c))
    child.once("error", reject)
    let cpuMs = 0
    let progressAt = Date.now()
    const watch = setInterval(() => {
      const used = child.pid === undefined ? undefined : cpuMsOf(child.pid)
      if (used !== undefined && used > cpuMs) {
        cpuMs = used
        progressAt = Date.now()
      }
      const idle = Date.now() - progressAt >= IDLE_MS
      if (!idle && Date.now() - started < RUNNING_AT_MOST_MS) return
      clearInterval(watch)
      child.kill("SIGKILL")
      const why = idle ? `no CPU used for ${IDLE_MS / 1000} s` : `still running after ${RUNNING_AT_MOST_MS / 1000} s`
      reject(new Error(`${why} (a start-up must not hang):\n${stdout}${stderr}`))
    }, 250)
    child.once("exit", (code) => {
      clearInterval(watch)
      resolve({ code, stderr, cpuMs })
    })
  })

/** One line on stderr saying what to fix; nothing that looks like a stack trace. */
const expectOneLine = (failed: Failed, pattern: RegExp) => {
  expect(failed.code).toBe(1)
  const lines = failed.stderr.trim().split("\n")
  expect(lines).toHaveLength(1)
  expect(lines[0]).toMatch(pattern)
  expect(failed.stderr).not.toMatch(/\n\s+at |Error:|\{$/m)
}

describe("a start-up that cannot succeed stops at once with one line", { timeout: RUNNING_AT_MOST_MS + 15_000 }, () => {
  it("REDIS_URL that is not a URL: the variable is named", async () => {
    const failed = await startFailing({ REDIS_URL: "notaurl" })
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(/^Invalid configuration:\n {2}- REDIS_URL: expected a redis:\/\/ or rediss:\/\/ URL/)
    expect(failed.stderr).not.toMatch(/notaurl|\n\s+at /)
  })

  it("a busy port", async () => {
    const blocker: Server = createServer()
    const port = await freePort()
    await new Promise<void>((r) => blocker.listen(port, "127.0.0.1", r))
    try {
      expectOneLine(await startFailing({ PORT: String(port) }), new RegExp(`^Cannot start: PORT: ${port} is already in use on 127\\.0\\.0\\.1; .*set PORT`))
    } finally {
      blocker.close()
    }
  })

  it("a HOST that does not resolve", async () => {
    expectOneLine(await startFailing({ HOST: "no-such-host.invalid" }), /^Cannot start: HOST: no-such-host\.invalid does not resolve to an address; set HOST/)
  })

  it("a HOST that is not an address of this machine", async () => {
    expectOneLine(await startFailing({ HOST: "192.0.2.1" }), /^Cannot start: HOST: 192\.0\.2\.1 is not an address of this machine; set HOST/)
  })

  it("DATA_DIR that is a file", async () => {
    const file = join(tempDataDir(), "a-file")
    writeFileSync(file, "")
    expectOneLine(await startFailing({ DATA_DIR: file }), new RegExp(`^Cannot start: DATA_DIR: .*${file}/.*\\(ENOTDIR\\); make DATA_DIR a directory this process can write`))
  })

  // root writes anywhere: the process then runs as nobody, as a container's service user would.
  it.skipIf(!unprivilegedCanRunNode())("DATA_DIR that this process may not write", async () => {
    const parent = tempDataDir()
    chmodSync(parent, 0o555)
    expectOneLine(
      await startFailing({ DATA_DIR: join(parent, "data") }, unprivileged()),
      new RegExp(`^Cannot start: DATA_DIR: .*${parent}/data.*\\(EACCES\\); make DATA_DIR a directory this process can write`)
    )
  })

  it("DATA_DIR under /proc, where Node's recursive mkdir spins for ever", async () => {
    const failed = await startFailing({ DATA_DIR: "/proc/nope" })
    expectOneLine(failed, /^Cannot start: DATA_DIR: .*\/proc\/nope.*\(ENOENT\)/)
    // Spinning, it would use the CPU until stopped; a start-up uses about a second of it.
    expect(failed.cpuMs).toBeLessThan(10_000)
  })

  it("Redis refusing the password in REDIS_URL", async () => {
    const { child, port } = await startRedisOnFreePort(["--requirepass", "right-password"])
    redises.push(child)
    const failed = await startFailing({ REDIS_URL: `redis://:wrong-password@127.0.0.1:${port}` })
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(/^Invalid configuration:\n {2}- REDIS_URL: Redis refused the credentials \(WRONGPASS/)
    expect(failed.stderr).not.toMatch(/wrong-password|\n\s+at /)
  })
})

describe("Redis away at start-up", () => {
  it("starts without it (counting in memory, not ready), then uses it once it answers", async () => {
    // The port stays ours until Redis starts on it (another test's redis-server could take a free one):
    // whatever connects is dropped, as by a Redis that is not up yet.
    const port = await freePort()
    const holder = createServer((socket) => socket.destroy())
    await new Promise<void>((r) => holder.listen(port, "127.0.0.1", r))
    const service = await spawnService({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: "late:" })
    running.push(service)
    expect(service.output()).toMatch(/Redis unreachable at start-up: limits and caches are kept in memory until it answers/)
    expect((await fetch(`${service.url}/api/health`)).status).toBe(200)
    const counted = () =>
      fetch(`${service.url}/api/subscribe`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
    expect((await counted()).status).toBe(400) // counted in memory, then refused for its empty body
    const notReady = await fetch(`${service.url}/readyz`)
    expect(notReady.status).toBe(503)
    expect((await notReady.json()).detail).toMatch(/redis/)

    await new Promise((r) => holder.close(r))
    redises.push(await startRedis(port))
    await expect.poll(() => fetch(`${service.url}/readyz`).then((r) => r.status), { timeout: 15_000, interval: 200 }).toBe(200)
    expect(service.output()).toMatch(/Redis connected/)
    expect((await counted()).status).toBe(400)
    // The count reaches Redis this time (counts are flushed in batches, src/http/sharedCounter.ts).
    await expect.poll(() => redisCommand(port, "KEYS", "late:ratelimit:subscribe:*"), { timeout: 10_000, interval: 200 }).toHaveLength(1)
    expect(service.child.exitCode).toBeNull()
  }, 45_000)
})

describe("temp files that interrupted writes left under DATA_DIR", () => {
  it("are removed at start-up when older than a minute, with one line saying how many", async () => {
    const dataDir = tempDataDir()
    const at = (file: string, ageMs: number) => {
      mkdirSync(dirname(file), { recursive: true })
      writeFileSync(file, "half written")
      const when = new Date(Date.now() - ageMs)
      utimesSync(file, when, when)
      return file
    }
    const left = [
      at(join(dataDir, "state", "coingecko-credits.json.4242.0123456789ab.tmp"), 120_000),
      at(join(dataDir, "rates-history", "coingecko", "usd", "bitcoin.json.4242.a1b2c3d4e5f6.tmp"), 120_000)
    ]
    const recent = at(join(dataDir, "state", "other.json.4243.0123456789ab.tmp"), 5_000)
    const service = await spawnService({ DATA_DIR: dataDir })
    running.push(service)
    for (const file of left) expect(existsSync(file), file).toBe(false)
    expect(existsSync(recent)).toBe(true)
    expect(service.output().match(/removed \d+ temporary files/g)).toEqual(["removed 2 temporary files"])
  })
})
