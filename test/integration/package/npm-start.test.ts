/**
 * The README's run command as a container or a process manager runs it: `npm start`, then SIGTERM to
 * the npm process. The service must drain and exit 0, and nothing may keep serving afterwards (C9).
 * Without `exec` in the script, npm's `sh -c` dies and leaves node re-parented and listening.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, tempDataDir } from "../../support/spawn.ts"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const leftovers: Array<number> = []

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}


const answers = (url: string) =>
  fetch(`${url}/api/health`, { signal: AbortSignal.timeout(1_000) }).then((r) => r.status === 200, () => false)

const childrenOf = (pid: number): Array<{ pid: number; args: string }> => {
  // ps exits 1 when there is no such process: an empty list.
  const out = spawnSync("ps", ["-o", "pid=,args=", "--ppid", String(pid)], { encoding: "utf8" }).stdout.trim()
  return out === "" ? [] : out.split("\n").map((line) => {
    const [, id, args] = /^\s*(\d+)\s+(.*)$/.exec(line)!
    return { pid: Number(id), args: args! }
  })
}

const descendantsOf = (pid: number): Array<number> =>
  childrenOf(pid).flatMap((c) => [c.pid, ...descendantsOf(c.pid)])

// Whatever a failed run left behind (npm, a shell, node), found before anything is killed.
afterAll(() => {
  const all = [...new Set(leftovers.flatMap((pid) => [pid, ...descendantsOf(pid)]))]
  for (const pid of all) if (alive(pid)) process.kill(pid, "SIGKILL")
})

const exitOf = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode)
    else child.once("exit", (code) => resolve(code))
  })

describe("npm start", () => {
  it("SIGTERM to the npm process drains the service, exits 0 and frees the port", async () => {
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)))
    const npm = spawn("npm", ["start"], {
      cwd: ROOT,
      env: { ...env, PORT: String(port), HOST: "127.0.0.1", DATA_DIR: tempDataDir(), COINGECKO_BASE_URL: "http://127.0.0.1:9/unused", COINBASE_BASE_URL: "http://127.0.0.1:9/unused" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    leftovers.push(npm.pid!)
    let output = ""
    npm.stdout!.on("data", (c) => (output += c))
    npm.stderr!.on("data", (c) => (output += c))
    const exited = exitOf(npm)

    const started = Date.now()
    while (!(await answers(url))) {
      if (npm.exitCode !== null || Date.now() - started > 20_000) throw new Error(`npm start did not serve:\n${output}`)
      await new Promise((r) => setTimeout(r, 100))
    }
    // npm → node directly (the script execs), no shell in between that would swallow the signal.
    const children = childrenOf(npm.pid!)
    const grandchildren = children.flatMap((c) => childrenOf(c.pid))
    leftovers.push(...children.map((c) => c.pid), ...grandchildren.map((c) => c.pid))
    expect(children.map((c) => c.args)).toEqual([expect.stringMatching(/^(\S*\/)?node .*src\/main\.ts$/)])

    const signalled = Date.now()
    npm.kill("SIGTERM")
    const code = await Promise.race([exited, new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 10_000))])
    const stopMs = Date.now() - signalled
    expect(code, output).toBe(0)
    expect(stopMs).toBeLessThan(10_000)
    expect([...children, ...grandchildren].filter((c) => alive(c.pid))).toEqual([])
    expect(await answers(url)).toBe(false)
    console.log(`npm start: serving after ${signalled - started} ms, stopped ${stopMs} ms after SIGTERM`)
  }, 40_000)
})
