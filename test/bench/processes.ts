/**
 * The benchmark's children (servers, wrk), their clean-up, and exact-bytes HTTP calls to them.
 * Every child is stopped on exit, on error and on SIGINT/SIGTERM/SIGHUP: nothing outlives the bench.
 */
import { type ChildProcess, spawnSync } from "node:child_process"
import { request as httpRequest } from "node:http"
import { createServer as createNetServer } from "node:net"
import { fail, HOST, sleep } from "./common.ts"

const children = new Set<ChildProcess>()
/** Synchronous clean-ups run once on exit (temp dirs, the in-process emulator). */
export const cleanups: Array<() => void> = []
let cleaning = false
export const isCleaning = () => cleaning

export const track = (child: ChildProcess) => {
  children.add(child)
  child.once("exit", () => children.delete(child))
  return child
}

/** SIGTERM, then SIGKILL after `graceMs`. Resolves with the exit code (or signal name). */
export const stopChild = (child: ChildProcess, graceMs = 5_000): Promise<number | string | null> =>
  new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done(child.exitCode ?? child.signalCode)
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      done(code ?? signal)
    })
    child.kill("SIGTERM")
  })

/** Synchronous last resort (process "exit" handler). */
const killAll = () => {
  for (const child of children) {
    try {
      child.kill("SIGKILL")
    } catch { /* already gone */ }
  }
  for (const cleanup of cleanups.splice(0)) {
    try {
      cleanup()
    } catch { /* best effort */ }
  }
}

export const shutdown = async (code: number) => {
  if (cleaning) return
  cleaning = true
  await Promise.all([...children].map((child) => stopChild(child, 3_000)))
  killAll()
  process.exit(code)
}

process.on("exit", killAll)
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    process.stderr.write(`\nbench: ${signal}, stopping children\n`)
    void shutdown(130)
  })
}

export const hasTaskset = () => spawnSync("taskset", ["-V"], { stdio: "ignore" }).status === 0

/** argv prefixed with `taskset -c cpus` when pinning. */
export const pinned = (cpus: string | undefined, argv: ReadonlyArray<string>) => (cpus === undefined ? [...argv] : ["taskset", "-c", cpus, ...argv])

export const freePort = (): Promise<number> =>
  new Promise((done, reject) => {
    const server = createNetServer()
    server.once("error", reject)
    server.listen(0, HOST, () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => done(port))
    })
  })

/** Keeps the last bytes of a stream, for error messages. */
export const tail = (stream: NodeJS.ReadableStream | null, max = 16_384) => {
  let text = ""
  stream?.on("data", (chunk: Buffer) => {
    text = (text + chunk.toString("utf8")).slice(-max)
  })
  return () => text
}

export interface Captured {
  readonly status: number
  /** Lower-case names in wire order, without Date and hop-by-hop headers. */
  readonly headers: Array<[string, string]>
  readonly body: Buffer
}

const HOP_BY_HOP = new Set(["date", "connection", "keep-alive", "transfer-encoding"])

export const call = (
  port: number,
  method: string,
  path: string,
  body?: string,
  headers: Readonly<Record<string, string>> = {},
  timeoutMs = 15_000
): Promise<Captured> =>
  new Promise((done, reject) => {
    const req = httpRequest({ host: HOST, port, method, path, agent: false, timeout: timeoutMs, headers: { ...headers, ...(body === undefined ? {} : { "content-length": Buffer.byteLength(body) }) } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        const pairs: Array<[string, string]> = []
        for (let i = 0; i < res.rawHeaders.length; i += 2) {
          const name = res.rawHeaders[i]!.toLowerCase()
          if (!HOP_BY_HOP.has(name)) pairs.push([name, res.rawHeaders[i + 1]!])
        }
        done({ status: res.statusCode ?? 0, headers: pairs, body: Buffer.concat(chunks) })
      })
      res.on("error", reject)
    })
    req.on("timeout", () => req.destroy(new Error(`timeout: ${method} ${path}`)))
    req.on("error", reject)
    req.end(body)
  })

export const waitReady = async (port: number, child: ChildProcess, what: string, stderr: () => string, timeoutMs = 30_000) => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null) fail(`${what} exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${stderr()}`)
    try {
      // Short: a connection accepted before the app's handler is attached is never answered
      // (@effect/platform-node listens while its layer is built and attaches the handler in serve()).
      const res = await call(port, "GET", "/api/health", undefined, {}, 1_000)
      if (res.status === 200) return
    } catch { /* not yet */ }
    await sleep(100)
  }
  fail(`${what} not ready on ${HOST}:${port} within ${timeoutMs} ms:\n${stderr()}`)
}
