/**
 * `npm test`'s set-up (the `pretest` script): what the tests need beside the npm packages, made ready
 * where it can be, as .ci/run does, else one line saying what to run and exit 1 at once.
 *
 * - `redis-server` (tests start private ones), Chromium (the /docs test) and nginx (the caching proxy of
 *   the CDN test): installed with apt-get when missing and running as root;
 * - Redis at REDIS_URL (default redis://127.0.0.1:6379, shared by several tests): when nothing
 *   answers on this machine's address, a redis-server is started there, as Debian's package would,
 *   and left running for later runs;
 * - PostgreSQL at DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test, trust auth; tests only
 *   add databases to it): checked to accept connections, else one line saying what to start.
 */
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { connect } from "node:net"

const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const nginxPath = process.env.NGINX_PATH ?? "/usr/sbin/nginx"
const redisUrl = new URL(process.env.REDIS_URL ?? "redis://127.0.0.1:6379")

const stop = (line: string): never => {
  process.stderr.write(`npm test: ${line}\n`)
  process.exit(1)
}

const onPath = (command: string) => spawnSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" }).status === 0

const missing = [
  ...(onPath("redis-server") ? [] : ["redis-server"]),
  ...(existsSync(chromiumPath) ? [] : ["chromium"]),
  ...(existsSync(nginxPath) || onPath("nginx") ? [] : ["nginx"])
]
if (missing.length > 0) {
  const install = `apt-get install -y ${missing.join(" ")}`
  if (process.getuid?.() !== 0 || !onPath("apt-get")) {
    stop(`${missing.join(" and ")} missing: run \`sudo apt-get update && sudo ${install}\`${missing.includes("chromium") ? " (or set CHROMIUM_PATH)" : ""}, then npm test again`)
  }
  process.stderr.write(`npm test: installing ${missing.join(" ")} with apt-get (once)\n`)
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
  for (const args of [["update", "-qq"], ["install", "-y", "-qq", ...missing]]) {
    const run = spawnSync("apt-get", args, { env, stdio: ["ignore", "ignore", "inherit"] })
    if (run.status !== 0) stop(`\`apt-get ${args.join(" ")}\` failed (see above); install ${missing.join(" ")} and run npm test again`)
  }
}

/** Whether a Redis answers PING there within a second (an error reply such as NOAUTH is an answer). */
const answers = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, host)
    const done = (result: boolean) => {
      socket.destroy()
      resolve(result)
    }
    socket.setTimeout(1_000, () => done(false))
    socket.once("error", () => done(false))
    socket.once("connect", () => socket.write("PING\r\n"))
    socket.once("data", (reply) => done(/^[+-]/.test(reply.toString())))
  })

const host = redisUrl.hostname.replace(/^\[|\]$/g, "")
const port = Number(redisUrl.port || 6379)
if (redisUrl.protocol === "redis:" && !(await answers(host, port))) {
  if (!["127.0.0.1", "localhost", "::1"].includes(host)) {
    stop(`no Redis answers at ${host}:${port} (REDIS_URL): start it, or unset REDIS_URL to use one on this machine`)
  }
  const started = spawnSync("redis-server", ["--port", String(port), "--bind", host === "localhost" ? "127.0.0.1" : host, "--save", "", "--appendonly", "no", "--daemonize", "yes"], {
    stdio: ["ignore", "ignore", "inherit"]
  })
  let up = started.status === 0
  for (let i = 0; up && i < 50 && !(await answers(host, port)); i++) await new Promise((r) => setTimeout(r, 100))
  up &&= await answers(host, port)
  if (!up) stop(`could not start redis-server on ${host}:${port}: start a Redis there (or set REDIS_URL), then npm test again`)
  process.stderr.write(`npm test: started redis-server on ${host}:${port} (left running for later runs)\n`)
}

/** Whether something accepts a TCP connection there within a second (PostgreSQL itself checks the rest). */
const accepts = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, host)
    const done = (result: boolean) => {
      socket.destroy()
      resolve(result)
    }
    socket.setTimeout(1_000, () => done(false))
    socket.once("error", () => done(false))
    socket.once("connect", () => done(true))
  })

const databaseUrl = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test")
const pgHost = databaseUrl.hostname.replace(/^\[|\]$/g, "")
const pgPort = Number(databaseUrl.port || 5432)
if (!(await accepts(pgHost, pgPort))) {
  stop(`no PostgreSQL answers at ${pgHost}:${pgPort} (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test): ` +
    "start it (Debian: `sudo apt-get install -y postgresql`, trust auth for local connections), then npm test again")
}
