/**
 * The clients CLI against both stores (issue 16, C6): the same commands print the same output, byte
 * for byte once ids, secrets, key ids and times are masked, and fail the same way, whether the
 * clients live in files under DATA_DIR or in PostgreSQL (DATABASE_URL).
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { jwksOf, makeKey } from "../../support/assertionKit.ts"
import { childEnv, tempDataDir } from "../../support/spawn.ts"
import { freshDatabase } from "../../support/privateServers.ts"

const run = promisify(execFile)
let database: Awaited<ReturnType<typeof freshDatabase>>
let jwksFile = ""
let nextJwksFile = ""
beforeAll(async () => {
  database = await freshDatabase()
  const dir = tempDataDir()
  jwksFile = join(dir, "jwks.json")
  nextJwksFile = join(dir, "next-jwks.json")
  writeFileSync(jwksFile, JSON.stringify(jwksOf(await makeKey("ES256", "partner-key-1"))))
  writeFileSync(nextJwksFile, JSON.stringify(jwksOf(await makeKey("RS256", "partner-key-2"))))
})
afterAll(() => database?.drop())

/** Exit code and stdout of one command. */
const cli = (env: Record<string, string>, args: ReadonlyArray<string>) =>
  run(process.execPath, ["src/cli/clients.ts", ...args], { env: { ...childEnv, ...env }, encoding: "utf8", timeout: 30_000 })
    .then((r) => ({ code: 0, stdout: r.stdout }), (e: { code?: number; stdout?: string }) => ({ code: e.code, stdout: e.stdout ?? "" }))

/** Runs one operator session and returns its transcript with the values that differ by nature masked. */
const session = async (env: Record<string, string>) => {
  const transcript: Array<string> = []
  const step = async (args: ReadonlyArray<string>) => {
    const result = await cli(env, args)
    transcript.push(`$ clients ${args.join(" ")} → ${result.code}\n${result.stdout}`)
    return result.stdout
  }
  const created = JSON.parse(await step(["create", "--name", "Partner", "--scope", "rates:read health:read"]))
  await step(["create", "--name", "Second", "--scope", "subscriptions:write"])
  await step(["list"])
  await step(["rotate", created.client_id])
  await step(["revoke", created.client_id])
  await step(["revoke", created.client_id])
  await step(["rotate", created.client_id])
  await step(["revoke", "no-such-client"])
  await step(["create", "--name", "Bad", "--scope", "admin"])
  await step(["list"])
  // A private_key_jwt client (issue 34): its keys, shown and listed, then replaced.
  const keyed = JSON.parse(await step(["create", "--name", "Keyed", "--scope", "rates:read", "--jwks-file", jwksFile]))
  await step(["rotate", keyed.client_id, "--jwks-file", nextJwksFile])
  await step(["rotate", keyed.client_id])
  await step(["list"])
  await step(["rotate-key"])
  return transcript.join("\n")
    .replaceAll(created.client_id, "ID")
    .replaceAll(keyed.client_id, "KEYED")
    .replaceAll(/"(client_id|client_secret|kid)": ?"[A-Za-z0-9_-]+"/g, `"$1": "…"`)
    .replaceAll(/"[A-Za-z0-9_-]{43}"/g, `"…"`)
    .replaceAll(/"\d{4}-\d{2}-\d{2}T[\d:.]+Z"/g, `"<time>"`)
}

describe("clients CLI on files and on PostgreSQL", () => {
  it("prints the same output for the same session", async () => {
    const [files, postgres] = await Promise.all([
      session({ DATA_DIR: tempDataDir() }),
      session({ DATA_DIR: tempDataDir(), DATABASE_URL: database.url })
    ])
    expect(postgres).toBe(files)
    expect(files).toContain(`$ clients revoke no-such-client → 1`)
    expect(files).toContain(`$ clients create --name Bad --scope admin → 2`)
    expect(files).toContain(`"kids":["partner-key-2"]`)
    expect(files).toContain(`$ clients rotate KEYED → 2`)
  }, 120_000)
})
