/**
 * The documented CLI command, run as docs/integrators.md shows it (through npm) and piped: stdout is JSON alone,
 * messages and logs go to stderr, and the undocumented `npm run clients` into a pipe (npm's banner on
 * stdout) is refused before a secret can be issued and lost.
 */
import { spawnSync } from "node:child_process"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { tempDataDir } from "../../support/spawn.ts"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const DATA_DIR = tempDataDir()

/**
 * npm as an operator's shell runs it, stdout a pipe; no `npm_*` variables of an outer `npm test`, and
 * no DATABASE_URL of CI: these clients live in this test's DATA_DIR, counted by no other test.
 */
const npm = (args: ReadonlyArray<string>) => {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && k !== "DATABASE_URL"))
  const res = spawnSync("npm", args, { cwd: ROOT, env: { ...env, DATA_DIR }, encoding: "utf8", timeout: 30_000 })
  return { code: res.status, stdout: res.stdout, stderr: res.stderr }
}

const listed = () => {
  const res = npm(["run", "--silent", "clients", "--", "list"])
  expect(res.code).toBe(0)
  return (JSON.parse(res.stdout) as Array<{ client_id: string; name: string }>)
}

describe("npm run --silent clients (the documented command)", () => {
  it("create: stdout is exactly the JSON credentials, nothing else", () => {
    const res = npm(["run", "--silent", "clients", "--", "create", "--name", "piped", "--scope", "rates:read health:read"])
    expect(res.code, res.stderr).toBe(0)
    const credentials = JSON.parse(res.stdout)
    expect(Object.keys(credentials)).toEqual(["client_id", "client_secret"])
    expect(res.stderr).not.toContain(credentials.client_secret)
    expect(listed().map((c) => c.client_id)).toContain(credentials.client_id)
  })

  it("rotate-key: the key file is created (logged on stderr) and stdout still parses as JSON", () => {
    const res = npm(["run", "-s", "clients", "--", "rotate-key"])
    expect(res.code, res.stderr).toBe(0)
    expect(JSON.parse(res.stdout)).toMatchObject({ kid: expect.any(String) })
  })

  it("without --silent into a pipe: refused with the command to run, and no client is created", () => {
    const before = listed().length
    const res = npm(["run", "clients", "--", "create", "--name", "lost secret", "--scope", "rates:read"])
    expect(res.code).toBe(2)
    expect(res.stdout).not.toMatch(/client_secret/)
    expect(res.stderr).toContain(`npm run --silent clients -- create --name "lost secret" --scope rates:read`)
    expect(listed()).toHaveLength(before)
  })
})
