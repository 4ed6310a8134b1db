/**
 * .env.example: every variable of docs/configuration.md's table, each with a one-line comment and its
 * default, and nothing the table does not know; the defaults as written start the service.
 */
import { readFileSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { spawnService } from "../../support/spawn.ts"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const example = readFileSync(resolve(ROOT, ".env.example"), "utf8").split("\n")

/** `# NAME=value` lines, with the comment line above each. */
const entries = example.flatMap((line, i) => {
  const match = /^# ([A-Z][A-Z0-9_]+)=(.*)$/.exec(line)
  return match === null ? [] : [{ name: match[1]!, value: match[2]!, comment: example[i - 1] ?? "" }]
})

/** Variable names in the first column of docs/configuration.md's table. */
const documentedVariables = () => {
  const doc = readFileSync(resolve(ROOT, "docs/configuration.md"), "utf8")
  const section = doc.slice(doc.indexOf("## The variables"), doc.indexOf("\n## ", doc.indexOf("## The variables") + 1))
  return section.split("\n").filter((line) => line.startsWith("| `")).flatMap((line) =>
    [...line.split("|")[1]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!)
  )
}

describe(".env.example", () => {
  it("lists exactly the documented variables, once each, each after a one-line comment", () => {
    const names = entries.map((e) => e.name)
    expect(new Set(names).size).toBe(names.length)
    expect([...names].sort()).toEqual([...new Set(documentedVariables())].sort())
    for (const entry of entries) {
      expect(entry.comment, entry.name).toMatch(/^# \S.{10,}$/)
      expect(entry.comment, entry.name).not.toMatch(/^# [A-Z][A-Z0-9_]+=/)
    }
  })

  it("shows the defaults the service starts with", async () => {
    const env = Object.fromEntries(entries.filter((e) => e.value !== "").map((e) => [e.name, e.value]))
    expect(env).toMatchObject({ PORT: "3000", HOST: "0.0.0.0", APP_ENV: "development", DATA_DIR: "./data", CORS_ORIGINS: "*" })
    // The test's own listen address, data directory and (unreachable) upstream; everything else as written.
    for (const name of ["PORT", "HOST", "DATA_DIR", "COINGECKO_BASE_URL"]) delete env[name]
    const service = await spawnService(env)
    try {
      const health = await fetch(`${service.url}/api/health`)
      expect(health.status).toBe(200)
      expect((await health.json()).environment).toBe("development")
    } finally {
      expect(await service.stop()).toBe(0)
    }
  }, 30_000)
})
