/**
 * The service process as the soak runs it (soak.ts): an OAuth client registered with the CLI, the environment
 * (high rate limits, short upstream timeouts, the emulators as upstreams), the process started with its log in a
 * file and its inspector open, its memory and descriptors read from /proc and after a forced full GC, and its stop.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { closeSync, openSync, readdirSync, readFileSync } from "node:fs"
import type { BrevoEmulator } from "../emulators/brevo.ts"
import type { CoinGeckoEmulator } from "../emulators/coingecko.ts"
import { childEnv } from "../support/spawn.ts"
import { ROOT, sleep } from "./common.ts"
import type { SoakOptions } from "./soakOptions.ts"

export interface Sample {
  readonly t: number
  readonly rssKb: number
  readonly fds: number
}

export const sample = (pid: number, t: number): Sample => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const rssKb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN)
  return { t, rssKb, fds: readdirSync(`/proc/${pid}/fd`).length }
}

/** An OAuth client, registered with the operator CLI before the service starts. */
export const createClient = (dataDir: string) => {
  const created = spawnSync(process.execPath, ["src/cli/clients.ts", "create", "--name", "soak", "--scope", "health:read rates:read subscriptions:write"], {
    cwd: ROOT,
    env: { ...childEnv, DATA_DIR: dataDir },
    encoding: "utf8"
  })
  if (created.status !== 0) throw new Error(`clients create failed: ${created.stderr}`)
  return JSON.parse(created.stdout) as { client_id: string; client_secret: string }
}

/** The service's environment: the emulators as upstreams, short upstream timeouts, rate limits nobody reaches. */
export const serviceEnv = ({ brevo, coingecko, dataDir, options, port, publicBaseUrl }: {
  readonly options: SoakOptions
  readonly port: number
  readonly publicBaseUrl: string
  readonly dataDir: string
  readonly coingecko: CoinGeckoEmulator
  readonly brevo: BrevoEmulator
}): Record<string, string> => ({
  HOST: "127.0.0.1",
  PORT: String(port),
  APP_ENV: "development",
  DATA_DIR: dataDir,
  PUBLIC_BASE_URL: publicBaseUrl,
  COINGECKO_BASE_URL: coingecko.url,
  COINGECKO_TIMEOUT_MS: "400",
  COINGECKO_REQUEST_BUDGET_MS: "1500",
  COINGECKO_RETRIES: "1",
  COINGECKO_RETRY_BASE_MS: "50",
  COINGECKO_CALLS_PER_MIN: "10000",
  COINGECKO_BREAKER_OPEN_MS: "2000",
  COINGECKO_LATEST_TTL_S: "5",
  COINGECKO_DEFAULT_RETRY_AFTER_S: "2",
  NEWSLETTER_PROVIDER: options.provider,
  NEWSLETTER_TIMEOUT_MS: "400",
  NEWSLETTER_DEADLINE_MS: "1500",
  NEWSLETTER_RETRIES: "1",
  ...(options.provider === "brevo"
    ? {
      BREVO_BASE_URL: brevo.url,
      BREVO_API_KEY: "test-brevo-key",
      BREVO_LIST_IDS: "7",
      BREVO_DOI_TEMPLATES: "es:11,en:12,fr:13,it:14,pt:15",
      BREVO_DOI_REDIRECT_URL: "https://www.example.com/confirmed"
    }
    : {}),
  RATE_LIMIT_HEALTH_PER_MIN: "10000000",
  RATE_LIMIT_RATES_PER_MIN: "10000000",
  RATE_LIMIT_SUBSCRIBE_PER_MIN: "10000000",
  OAUTH_MAX_FAILURES_PER_MIN: "10000"
})

/** The service's V8 heap in use and RSS, read just after a forced full GC. */
export interface MemoryReading {
  readonly heapUsedMb: number
  readonly rssMb: number
}

export interface Service {
  readonly child: ChildProcess
  readonly url: string
  /** The service's inspector WebSocket URL (loopback only). */
  readonly inspector: string
  /** Reads the service's log file: lines logged, unhandled errors among them, the last lines. */
  readonly scanLog: () => { readonly lines: number; readonly requests: number; readonly unhandled: ReadonlyArray<string>; readonly tail: string }
}

/**
 * The service logs to a file, not a pipe: writes to a file are synchronous in Node, so a soak runner
 * that reads slowly (it shares the CPU with the traffic it drives) cannot make the service buffer its
 * stdout in memory, which would show up as RSS growth of the service.
 */
export const startService = async (env: Record<string, string>, port: number, logFile: string): Promise<Service> => {
  const fd = openSync(logFile, "w")
  // The inspector (loopback, random port) lets the soak force a full GC before it reads memory figures.
  const child = spawn(process.execPath, ["--inspect=127.0.0.1:0", "src/main.ts"], { cwd: ROOT, env: { ...childEnv, ...env }, stdio: ["ignore", fd, fd] })
  closeSync(fd) // the child holds its own copy
  const scanLog = () => {
    const all = readFileSync(logFile, "utf8").split("\n").filter((line) => line !== "")
    // An unhandled error is a defect even when the client saw a tidy 500 (or nothing).
    const unhandled = all.filter((line) => /unhandled error|"level":"(ERROR|FATAL)"|Uncaught|UnhandledPromiseRejection/i.test(line)).map((l) => l.slice(0, 400))
    const requests = all.filter((line) => line.includes('"msg":"request"')).length
    return { lines: all.length, requests, unhandled, tail: all.slice(-40).map((l) => l.slice(0, 400)).join("\n") }
  }
  const started = Date.now()
  while (!readFileSync(logFile, "utf8").includes("Listening on")) {
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode} before listening:\n${scanLog().tail}`)
    if (Date.now() - started > 20_000) throw new Error(`service did not start in 20 s:\n${scanLog().tail}`)
    await sleep(50)
  }
  const inspector = /Debugger listening on (ws:\/\/\S+)/.exec(readFileSync(logFile, "utf8"))?.[1]
  if (inspector === undefined) throw new Error(`no inspector URL in the service log:\n${scanLog().tail}`)
  return { child, url: `http://127.0.0.1:${port}`, inspector, scanLog }
}

/**
 * Forces a full garbage collection in the service through the inspector protocol, then reads its
 * heap (process.memoryUsage) and RSS: what is left is what the process really holds, so two such
 * readings compare live memory instead of wherever V8's collector happened to be.
 */
export const memoryAfterGc = async (inspectorUrl: string, pid: number): Promise<MemoryReading> => {
  const ws = new WebSocket(inspectorUrl)
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true })
    ws.addEventListener("error", () => reject(new Error(`inspector ${inspectorUrl} unreachable`)), { once: true })
  })
  let nextId = 1
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<any>((resolve, reject) => {
      const id = nextId++
      const timer = setTimeout(() => reject(new Error(`inspector ${method} timed out`)), 15_000)
      const onMessage = (event: MessageEvent) => {
        const message = JSON.parse(String(event.data))
        if (message.id !== id) return
        clearTimeout(timer)
        ws.removeEventListener("message", onMessage)
        if (message.error !== undefined) reject(new Error(`${method}: ${message.error.message}`))
        else resolve(message.result)
      }
      ws.addEventListener("message", onMessage)
      ws.send(JSON.stringify({ id, method, params }))
    })
  try {
    await call("HeapProfiler.collectGarbage")
    await call("HeapProfiler.collectGarbage") // a second pass frees what the first one's finalizers released
    const evaluated = await call("Runtime.evaluate", { expression: "process.memoryUsage().heapUsed", returnByValue: true })
    return { heapUsedMb: Number(evaluated.result.value) / 1_048_576, rssMb: sample(pid, 0).rssKb / 1024 }
  } finally {
    ws.close()
  }
}

export const stopService = (child: ChildProcess, timeoutMs = 15_000) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode)
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      resolve(null)
    }, timeoutMs)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve(code)
    })
    child.kill("SIGTERM")
  })
