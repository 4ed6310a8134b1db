/**
 * `npm test` on a machine that lacks what the tests need (issue 15.9): its `pretest` set-up either
 * makes it ready (a Redis started where REDIS_URL points on this machine) or stops at once with one
 * line saying what to run, never a two-minute timeout and a serialised spawn error.
 */
import { spawnSync } from "node:child_process"
import { afterAll, describe, expect, it } from "vitest"
import { redisCommand } from "../../support/redis.ts"
import { childEnv, freePort, unprivileged, unprivilegedCanRunNode } from "../../support/spawn.ts"

const started: Array<number> = []
afterAll(async () => {
  for (const port of started) await redisCommand(port, "SHUTDOWN", "NOSAVE").catch(() => undefined)
})

const pretest = (env: Record<string, string>, asUser: { uid?: number; gid?: number } = {}) =>
  spawnSync(process.execPath, ["test/support/pretest.ts"], {
    env: { ...childEnv, ...env },
    encoding: "utf8",
    timeout: 20_000,
    ...asUser
  })

describe("npm test's set-up", () => {
  // root would install it: run as nobody, as a developer's account would.
  it.skipIf(!unprivilegedCanRunNode())("stops at once with the command to run when Chromium is missing and it may not install it", () => {
    const started = Date.now()
    const run = pretest({ CHROMIUM_PATH: "/nonexistent/chromium" }, unprivileged())
    expect(run.status).toBe(1)
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(run.stderr.trim().split("\n")).toEqual([
      "npm test: chromium missing: run `sudo apt-get update && sudo apt-get install -y chromium` (or set CHROMIUM_PATH), then npm test again"
    ])
  })

  it("starts a redis-server where REDIS_URL points on this machine when none answers there", async () => {
    const port = await freePort()
    const run = pretest({ REDIS_URL: `redis://127.0.0.1:${port}` })
    started.push(port)
    expect(run.status, run.stderr).toBe(0)
    expect(run.stderr).toBe(`npm test: started redis-server on 127.0.0.1:${port} (left running for later runs)\n`)
    expect(await redisCommand(port, "PING")).toBe("PONG")
    // A second run finds it and says nothing.
    expect(pretest({ REDIS_URL: `redis://127.0.0.1:${port}` }).stderr).toBe("")
  })

  it("names REDIS_URL when the Redis it points at elsewhere does not answer", () => {
    const run = pretest({ REDIS_URL: "redis://192.0.2.1:6379" })
    expect(run.status).toBe(1)
    expect(run.stderr).toMatch(/^npm test: no Redis answers at 192\.0\.2\.1:6379 \(REDIS_URL\)/)
  })
})
