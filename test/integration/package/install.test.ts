/**
 * The README's `npm install` as npm 11 runs it with the install-script policy made strict, which is what
 * later npm versions do by default (unapproved dependency scripts skipped): the `node` package's
 * `preinstall`, which puts Node 24 into node_modules, must be approved in package.json (`allowScripts`).
 * Run in a copy of package.json and package-lock.json; packages come from the npm cache when held there.
 */
import { spawnSync } from "node:child_process"
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { beforeAll, describe, expect, it } from "vitest"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const WORK = mkdtempSync(join(tmpdir(), "install-"))

/** npm of the machine, without the `npm_*` variables of an outer `npm test` (they would redirect it). */
const env = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))),
  npm_config_update_notifier: "false"
}

const npm = (args: ReadonlyArray<string>) => {
  const res = spawnSync("npm", args, { cwd: WORK, encoding: "utf8", env, timeout: 240_000 })
  return { status: res.status, output: `${res.stdout}${res.stderr}${res.error ?? ""}` }
}

let install: { status: number | null; output: string }
beforeAll(() => {
  for (const file of ["package.json", "package-lock.json"]) copyFileSync(join(ROOT, file), join(WORK, file))
  install = npm(["install", "--strict-allow-scripts", "--prefer-offline", "--no-audit", "--no-fund"])
}, 250_000)

describe("npm install (install scripts approved in package.json)", () => {
  it("succeeds with every install script reviewed: none skipped, none uncovered", () => {
    expect(install.status, install.output).toBe(0)
    expect(install.output).not.toMatch(/not yet covered by allowScripts|install-scripts/)
    const ls = npm(["install-scripts", "ls"])
    expect(ls.status).toBe(0)
    expect(ls.output).toMatch(/No packages with unreviewed install scripts/)
  })

  it("approves the node package by name (it runs Node 24's download), and nothing else", () => {
    const allow = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).allowScripts as Record<string, boolean>
    expect(Object.entries(allow).filter(([, allowed]) => allowed).map(([name]) => name)).toEqual(["node"])
  })

  it("puts Node 24 into node_modules, where npm scripts find it", () => {
    const node = spawnSync(join(WORK, "node_modules/.bin/node"), ["--version"], { encoding: "utf8" })
    expect(node.status, `${node.stdout}${node.stderr}${node.error ?? ""}`).toBe(0)
    expect(node.stdout.trim()).toMatch(/^v24\./)
  })
})
