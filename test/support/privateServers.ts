/** Private servers for outage tests (never the shared ones): a redis-server and a PostgreSQL cluster. */
import { type ChildProcess, execFile } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { startRedis as startRedisServer, startRedisOnFreePort } from "./redis.ts"
import { childEnv, freePort, tempDataDir } from "./spawn.ts"

const run = promisify(execFile)

/** A redis-server on a free port, without persistence; `stop` kills it, `start` brings it back empty (on its port). */
export const startRedis = async () => {
  const first = await startRedisOnFreePort()
  const port = first.port
  let child: ChildProcess | undefined = first.child
  const start = async () => {
    child = await startRedisServer(port)
  }
  const stop = async () => {
    const current = child
    child = undefined
    if (current === undefined || current.exitCode !== null) return
    const exited = new Promise((r) => current.once("exit", r))
    current.kill("SIGKILL")
    await exited
  }
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
 * which a test may stop and start again; `remove` stops it and deletes its files. PostgreSQL refuses
 * to run as root: as root (a CI container), its programs run as the `postgres` user.
 */
export const startPostgres = async () => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), "crypto-api-pg-"))
  const data = join(dir, "data")
  const asRoot = process.getuid?.() === 0
  if (asRoot) await run("chown", ["postgres", dir])
  const pg = (name: string, args: ReadonlyArray<string>) =>
    asRoot ? run("runuser", ["-u", "postgres", "--", pgBin(name), ...args]) : run(pgBin(name), args)
  await pg("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
  const start = () =>
    pg("pg_ctl", [
      "-D", data, "-l", join(dir, "log"), "-w", "-t", "30",
      "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
      "start"
    ]).then(() => undefined)
  const stop = () => pg("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]).then(() => undefined)
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

/** The shared PostgreSQL of developer and CI machines (trust auth), which tests only add databases to. */
const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** Runs statements outside a transaction (CREATE/DROP DATABASE) on the server of `url`. */
export const runSql = (url: string, statements: ReadonlyArray<string>) =>
  Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const sql = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 })
      const rows: Array<ReadonlyArray<Record<string, unknown>>> = []
      for (const statement of statements) rows.push(yield* sql.unsafe<Record<string, unknown>>(statement))
      return rows
    })).pipe(Effect.provide(Reactivity.layer))
  )

/** A new, empty database on the server of DATABASE_URL; `drop` removes it (and ends its sessions). */
export const freshDatabase = async (server = databaseUrl) => {
  const name = `crypto_api_test_${randomUUID().replaceAll("-", "")}`
  await runSql(server, [`CREATE DATABASE ${name}`])
  const url = new URL(server)
  url.pathname = `/${name}`
  return { url: url.toString(), drop: () => runSql(server, [`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`]).then(() => undefined) }
}

/** The clients CLI, as an operator runs it, with this environment only; stdout parsed as JSON. */
export const clientsCli = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const result = await run(process.execPath, ["src/cli/clients.ts", ...args], {
    env: { ...childEnv, DATA_DIR: tempDataDir(), ...env },
    encoding: "utf8",
    timeout: 30_000
  }).catch((e: { code?: number; stdout?: string; stderr?: string }) => {
    throw new Error(`clients ${args.join(" ")} failed (${e.code}): ${e.stderr ?? ""}`)
  })
  return JSON.parse(result.stdout)
}

/** A client-credentials token from `service`, or the HTTP status of the refusal. */
export const requestToken = async (service: { readonly url: string }, clientId: string, secret: string) => {
  const basic = Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString("base64")
  const res = await fetch(`${service.url}/oauth/token`, {
    method: "POST",
    headers: { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded" },
    body: "grant_type=client_credentials"
  })
  const body = await res.json() as { access_token?: string }
  return { status: res.status, token: body.access_token }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Polls `probe` every 25 ms until it holds; resolves with the milliseconds it took, or rejects after `timeoutMs`. */
export const within = async (timeoutMs: number, probe: () => Promise<boolean>) => {
  const started = Date.now()
  for (;;) {
    if (await probe()) return Date.now() - started
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms`)
    await sleep(25)
  }
}
