/**
 * Bounded soak of the real service process (`node src/main.ts`) against the emulators.
 *
 *   npm run soak -- --duration 180 [--warmup 30] [--concurrency 8] [--provider brevo|local]
 *                   [--fault-period 10] [--rss-tolerance-mb 40] [--heap-tolerance-mb 16] [--fd-tolerance 16] [--seed 1]
 *
 * Starts the CoinGecko and Brevo emulators in this process, creates an OAuth client with the CLI, starts
 * the service with high rate limits and short upstream timeouts, then drives mixed traffic (health, rates
 * with varied symbols/currencies/days, subscriptions with unique addresses, token requests, Bearer calls,
 * bad requests) for the duration while upstream faults are switched on and off every fault period.
 *
 * It fails (exit 1) when:
 * - an answer breaks the HTTP invariants of the fuzz suite (test/support/fuzz/invariants.ts), a 500 included;
 * - the service logs an unhandled error;
 * - RSS (VmRSS) or the V8 heap in use, each read after a full GC forced through the inspector, or the
 *   open file descriptors (/proc/<pid>/fd) grow after warm-up by more than the tolerance, or
 *   descriptors are not given back once the clients are gone;
 * - a subscription answered 200 is not with the provider exactly as accepted (Brevo emulator contacts,
 *   or `node src/cli/subscribers.ts export` for the local list), or the provider holds one never sent;
 * - SIGTERM does not stop the service with exit code 0.
 *
 * Linux only (/proc). `runSoak` is also used by test/integration/fuzz/soak.test.ts for a short CI run.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync } from "node:fs"
import { Agent } from "node:http"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { type BrevoEmulator, startBrevoEmulator } from "../emulators/brevo.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../emulators/coingecko.ts"
import { emulatedCurrencies } from "../emulators/coingecko-data.ts"
import type { Fault as NewsletterFault } from "../emulators/newsletter-kit.ts"
import { childEnv, freePort } from "../support/spawn.ts"
import { type RawRequest, type RawResponse, send } from "../support/fuzz/http.ts"
import { violationsOf } from "../support/fuzz/invariants.ts"
import { loadOpenApi, type OpenApiModel } from "../support/fuzz/openapi.ts"

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..")

export interface SoakOptions {
  readonly durationS: number
  readonly warmupS: number
  readonly concurrency: number
  readonly provider: "brevo" | "local"
  readonly faultPeriodS: number
  /** Allowed growth of RSS, read after a forced full GC, between the end of warm-up and the end. */
  readonly rssToleranceMb: number
  /** Allowed growth of the V8 heap in use after a forced full GC over the same span. */
  readonly heapToleranceMb: number
  readonly fdTolerance: number
  readonly seed: number
  /** Requests the run makes at least, going on past `durationS` (at most 4 times it) on a busy machine; absent: none. */
  readonly minRequests?: number
  /** Progress lines (default: stderr). */
  readonly log?: (line: string) => void
}

export const defaultSoakOptions: SoakOptions = {
  durationS: 120,
  warmupS: 30,
  concurrency: 8,
  provider: "brevo",
  faultPeriodS: 10,
  rssToleranceMb: 40,
  heapToleranceMb: 16,
  fdTolerance: 16,
  seed: 1
}

interface Sample {
  readonly t: number
  readonly rssKb: number
  readonly fds: number
}

export interface SoakSummary {
  readonly options: SoakOptions
  readonly requests: number
  readonly seconds: number
  readonly byStatus: Readonly<Record<string, number>>
  readonly byKind: Readonly<Record<string, number>>
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  /** After warm-up and at the end: read after a forced full GC. Peak: the highest 1 s sample. */
  readonly rssMb: { readonly idleBefore: number; readonly afterWarmup: number; readonly end: number; readonly peak: number }
  readonly heapUsedMb: { readonly afterWarmup: number; readonly end: number }
  readonly fds: { readonly idleBefore: number; readonly afterWarmup: number; readonly end: number; readonly idleAfter: number }
  readonly faultsApplied: ReadonlyArray<string>
  readonly subscriptions: { readonly accepted: number; readonly failed: number; readonly delivered: number }
  readonly exitCode: number | null
  readonly violations: ReadonlyArray<string>
  readonly violationCount: number
}

// ---- helpers -----------------------------------------------------------------------------------

/** mulberry32: a small seeded PRNG so a run's traffic mix is reproducible. */
const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

const median = (xs: ReadonlyArray<number>) => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor((s.length - 1) / 2)]!
}
const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const sample = (pid: number, t: number): Sample => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const rssKb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN)
  return { t, rssKb, fds: readdirSync(`/proc/${pid}/fd`).length }
}

const LOCALES = ["es", "en", "fr", "it", "pt"] as const
const TEMPLATES: Record<string, number> = { es: 11, en: 12, fr: 13, it: 14, pt: 15 }
const SYMBOLS = ["BTC", "eth", "SOL", "xrp", "DOGE", "ada", "DOT", "LINK", "ltc", "PEPE", "HOT", "GHOST", "NOPE", "ZZZ9"]

// ---- the service process -------------------------------------------------------------------------

interface Service {
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
const startService = async (env: Record<string, string>, port: number, logFile: string): Promise<Service> => {
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
const memoryAfterGc = async (inspectorUrl: string, pid: number): Promise<{ readonly heapUsedMb: number; readonly rssMb: number }> => {
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

const stopService = (child: ChildProcess, timeoutMs = 15_000) =>
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

// ---- the soak ------------------------------------------------------------------------------------

export const runSoak = async (input: Partial<SoakOptions> = {}): Promise<SoakSummary> => {
  const options: SoakOptions = { ...defaultSoakOptions, ...input }
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const random = prng(options.seed)
  const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(random() * xs.length)]!
  const violations: Array<string> = []
  let violationCount = 0
  const violate = (what: string) => {
    violationCount++
    if (violations.length < 50) violations.push(what)
  }

  const coingecko: CoinGeckoEmulator = await startCoinGeckoEmulator({ host: "127.0.0.1" })
  const brevo: BrevoEmulator = await startBrevoEmulator({ host: "127.0.0.1" })
  let child: ChildProcess | undefined
  try {
    return await soakWith(options, log, random, pick, violate, () => ({ violations, violationCount }), coingecko, brevo, (c) => (child = c))
  } finally {
    if (child !== undefined && child.exitCode === null) child.kill("SIGKILL")
    await coingecko.close()
    await brevo.close()
  }
}

const soakWith = async (
  options: SoakOptions,
  log: (line: string) => void,
  random: () => number,
  pick: <A>(xs: ReadonlyArray<A>) => A,
  violate: (what: string) => void,
  verdicts: () => { violations: ReadonlyArray<string>; violationCount: number },
  coingecko: CoinGeckoEmulator,
  brevo: BrevoEmulator,
  onChild: (child: ChildProcess) => void
): Promise<SoakSummary> => {
  const dataDir = mkdtempSync(join(tmpdir(), "crypto-api-soak-"))
  const port = await freePort()
  const publicBaseUrl = `http://127.0.0.1:${port}`

  // An OAuth client, registered with the operator CLI before the service starts.
  const created = spawnSync(process.execPath, ["src/cli/clients.ts", "create", "--name", "soak", "--scope", "health:read rates:read subscriptions:write"], {
    cwd: ROOT,
    env: { ...childEnv, DATA_DIR: dataDir },
    encoding: "utf8"
  })
  if (created.status !== 0) throw new Error(`clients create failed: ${created.stderr}`)
  const client = JSON.parse(created.stdout) as { client_id: string; client_secret: string }
  const basic = `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString("base64")}`

  const service = await startService({
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
  }, port, join(dataDir, "service.log"))
  onChild(service.child)
  const pid = service.child.pid!

  const model: OpenApiModel = loadOpenApi(await (await fetch(`${service.url}/openapi.json`)).json())
  await sleep(300)
  const idleBefore = sample(pid, 0)

  const agent = new Agent({ keepAlive: true, maxSockets: options.concurrency })
  const durations: Array<number> = []
  const byStatus: Record<string, number> = {}
  const byKind: Record<string, number> = {}
  const accepted = new Map<string, string>() // normalised address → locale, for 200s
  const sentAddresses = new Set<string>()
  let failedSubscriptions = 0
  let accessToken: string | undefined
  let seq = 0

  const exchange = async (kind: string, req: RawRequest) => {
    let response: RawResponse
    try {
      response = await send(service.url, { ...req, agent, timeoutMs: 10_000 })
    } catch (error) {
      violate(`${kind}: ${req.method} ${req.path} got no answer (${String(error)})`)
      return undefined
    }
    durations.push(response.elapsedMs)
    byStatus[response.status] = (byStatus[response.status] ?? 0) + 1
    byKind[kind] = (byKind[kind] ?? 0) + 1
    const body = req.body === undefined ? "" : Buffer.isBuffer(req.body) ? req.body.toString("latin1").slice(0, 2_000) : req.body.slice(0, 2_000)
    const sent = `${req.method} ${req.path}\n${(req.headers ?? []).map(([n, v]) => `${n}: ${v}`).join("\n")}\n\n${body}`
    for (const v of violationsOf(model, publicBaseUrl, { method: req.method, target: req.path, sent, response })) {
      violate(`${kind} ${req.method} ${req.path} → ${response.status}: ${v}`)
    }
    return response
  }

  const jsonPost = (path: string, body: unknown, headers: Array<[string, string]> = []): RawRequest => ({
    method: "POST",
    path,
    headers: [["Content-Type", "application/json"], ...headers],
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

  const ratesBody = () => ({
    cryptos: Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(SYMBOLS)),
    currency: pick([...emulatedCurrencies.keys()]),
    days: random() < 0.7 ? pick([1, 7, 14, 30, 90]) : 1 + Math.floor(random() * 365)
  })

  /** One request of a kind drawn by weight. */
  const traffic: ReadonlyArray<readonly [weight: number, kind: string, run: () => Promise<unknown>]> = [
    [15, "health", () => exchange("health", { method: "GET", path: "/api/health", headers: [["Accept", "application/json"]] })],
    [25, "rates", () => exchange("rates", jsonPost("/api/v1/exchange-rates", ratesBody()))],
    [15, "subscribe", async () => {
      const locale = pick(LOCALES)
      const n = seq++
      // Mixed-case domains: what must reach the provider is the normalised (lower-case) domain.
      const domain = n % 3 === 0 ? "Example.COM" : "example.com"
      const email = `soak.${options.seed}.${n}@${domain}`
      const normalised = `soak.${options.seed}.${n}@example.com`
      sentAddresses.add(normalised)
      const res = await exchange("subscribe", jsonPost("/api/subscribe", { email, locale }))
      if (res?.status === 200) accepted.set(normalised, locale)
      else failedSubscriptions++
    }],
    [7, "token", async () => {
      const res = await exchange("token", {
        method: "POST",
        path: "/oauth/token",
        headers: [["Content-Type", "application/x-www-form-urlencoded"], ["Authorization", basic]],
        body: "grant_type=client_credentials&scope=health%3Aread+rates%3Aread"
      })
      if (res?.status === 200) accessToken = (JSON.parse(res.text) as { access_token: string }).access_token
    }],
    [3, "token-bad", () =>
      exchange("token-bad", {
        method: "POST",
        path: "/oauth/token",
        headers: [["Content-Type", "application/x-www-form-urlencoded"], ["Authorization", `Basic ${Buffer.from(`${client.client_id}:wrong`).toString("base64")}`]],
        body: "grant_type=client_credentials"
      })],
    [10, "bearer", () =>
      accessToken === undefined
        ? exchange("bearer", { method: "GET", path: "/api/health" })
        : random() < 0.5
        ? exchange("bearer", { method: "GET", path: "/api/health", headers: [["Authorization", `Bearer ${accessToken}`]] })
        : exchange("bearer", jsonPost("/api/v1/exchange-rates", ratesBody(), [["Authorization", `Bearer ${accessToken}`]]))],
    [25, "bad", () => {
      const bad: ReadonlyArray<() => RawRequest> = [
        () => jsonPost("/api/v1/exchange-rates", '{"cryptos": ['),
        () => ({ ...jsonPost("/api/subscribe", { email: "x@example.com", locale: "en" }), headers: [["Content-Type", "text/plain"]] }),
        () => ({ method: "GET", path: `/nope/${seq++}` }),
        () => ({ method: "DELETE", path: "/api/health" }),
        () => ({ method: "GET", path: "/api/subscribe" }),
        () => jsonPost("/api/v1/exchange-rates", { cryptos: ["BTC"], pad: "x".repeat(20_000) }),
        () => jsonPost("/api/v1/exchange-rates", { cryptos: [] }),
        () => jsonPost("/api/subscribe", { email: "not-an-address", locale: "en" }),
        () => jsonPost("/api/subscribe", { email: "a@example.com", locale: "xx", extra: 1 }),
        () => ({ method: "GET", path: "/api/health", headers: [["Authorization", "Bearer not.a.token"]] }),
        () => ({ ...jsonPost("/api/v1/exchange-rates", { cryptos: ["BTC"] }), headers: [["Content-Type", "application/json"], ["Content-Encoding", "gzip"]] })
      ]
      return exchange("bad", pick(bad)())
    }]
  ]
  const totalWeight = traffic.reduce((n, [w]) => n + w, 0)
  const nextRequest = () => {
    let r = random() * totalWeight
    for (const [weight, , run] of traffic) {
      r -= weight
      if (r < 0) return run()
    }
    return traffic[0]![2]()
  }

  // Faults: off during warm-up, then alternately on (the next one of the cycle) and off.
  const allFaults: ReadonlyArray<readonly [string, () => void]> = [
    ["coingecko 5xx", () => coingecko.setFault("5xx")],
    ["brevo 500", () => brevo.setFault("500")],
    ["coingecko hang", () => coingecko.setFault("hang")],
    ["brevo hang", () => brevo.setFault("hang")],
    ["coingecko 429 (Retry-After 2)", () => coingecko.setFault({ mode: "429", retryAfterSeconds: 2 })],
    ["brevo reset", () => brevo.setFault("reset")],
    ["coingecko truncated", () => coingecko.setFault("truncated")],
    ["brevo 429", () => brevo.setFault("429")],
    ["coingecko reset", () => coingecko.setFault("reset")],
    ["brevo garbage", () => brevo.setFault("garbage")],
    ["coingecko wrong-shape", () => coingecko.setFault("wrong-shape")],
    ["brevo slow 2 s", () => brevo.setFault({ mode: "slow", delayMs: 2_000 } satisfies NewsletterFault)],
    ["coingecko 401", () => coingecko.setFault("401")]
  ]
  const cycle = allFaults.filter(([name]) => options.provider === "brevo" || !name.startsWith("brevo"))
  const faultsOff = () => {
    coingecko.setFault("none")
    brevo.setFault("none")
  }
  const faultsApplied: Array<string> = []

  const startedAt = performance.now()
  const elapsedS = () => (performance.now() - startedAt) / 1000
  const samples: Array<Sample> = []
  const sampler = setInterval(() => {
    try {
      samples.push(sample(pid, elapsedS()))
    } catch {
      // the process is gone; the exit check reports it
    }
  }, 1_000)

  let phase = -1
  let atWarmup: Promise<{ readonly heapUsedMb: number; readonly rssMb: number }> | undefined
  const scheduler = setInterval(() => {
    const t = elapsedS()
    if (t < options.warmupS || t >= options.durationS) return
    atWarmup ??= memoryAfterGc(service.inspector, pid)
    const current = Math.floor((t - options.warmupS) / options.faultPeriodS)
    if (current === phase) return
    phase = current
    if (phase % 2 === 0 || cycle.length === 0) return faultsOff()
    const [name, apply] = cycle[Math.floor(phase / 2) % cycle.length]!
    faultsOff()
    apply()
    faultsApplied.push(`${Math.round(t)}s ${name}`)
    log(`[soak] ${Math.round(t)}s fault on: ${name}`)
  }, 200)

  const progress = setInterval(() => {
    const last = samples.at(-1)
    log(`[soak] ${Math.round(elapsedS())}s ${durations.length} requests, RSS ${last ? Math.round(last.rssKb / 1024) : "?"} MB, fds ${last?.fds ?? "?"}`)
  }, 15_000)

  log(`[soak] service pid ${pid} on ${service.url}; ${options.durationS}s with ${options.concurrency} clients, warm-up ${options.warmupS}s, provider ${options.provider}`)
  await Promise.all(Array.from({ length: options.concurrency }, async () => {
    const enough = () => durations.length >= (options.minRequests ?? 0) || elapsedS() >= options.durationS * 4
    while (elapsedS() < options.durationS || !enough()) await nextRequest()
  }))
  const seconds = elapsedS()
  // Read under the same conditions as at warm-up: just after the last request, before anything closes.
  const atEnd = await memoryAfterGc(service.inspector, pid)
  const warm = await (atWarmup ?? memoryAfterGc(service.inspector, pid))
  clearInterval(scheduler)
  clearInterval(progress)
  clearInterval(sampler)
  faultsOff()

  // Give every connection back, wait past the server's keep-alive timeout (5 s) and undici's (4 s).
  agent.destroy()
  await sleep(6_000)
  const idleAfter = sample(pid, elapsedS())

  // ---- verdicts ----------------------------------------------------------------------------------
  const measured = samples.filter((s) => s.t >= options.warmupS && s.t <= seconds)
  const window = Math.max(3, Math.round((seconds - options.warmupS) * 0.2))
  const first = measured.filter((s) => s.t < options.warmupS + window)
  const last = measured.filter((s) => s.t > seconds - window)
  const fdFirst = median(first.map((s) => s.fds))
  const fdLast = median(last.map((s) => s.fds))
  const peakRssMb = Math.max(...samples.map((s) => s.rssKb)) / 1024
  if (!(atEnd.rssMb - warm.rssMb <= options.rssToleranceMb)) {
    violate(`RSS after a full GC grew from ${warm.rssMb.toFixed(1)} MB after warm-up to ${atEnd.rssMb.toFixed(1)} MB (tolerance ${options.rssToleranceMb} MB)`)
  }
  if (!(atEnd.heapUsedMb - warm.heapUsedMb <= options.heapToleranceMb)) {
    violate(`heap in use after a full GC grew from ${warm.heapUsedMb.toFixed(1)} MB after warm-up to ${atEnd.heapUsedMb.toFixed(1)} MB (tolerance ${options.heapToleranceMb} MB)`)
  }
  if (!(fdLast - fdFirst <= options.fdTolerance)) {
    violate(`open descriptors grew from ${fdFirst} after warm-up to ${fdLast} (tolerance ${options.fdTolerance})`)
  }
  if (idleAfter.fds > idleBefore.fds + options.fdTolerance) {
    violate(`descriptors not given back: ${idleBefore.fds} idle before, ${idleAfter.fds} idle after (tolerance ${options.fdTolerance})`)
  }

  // Subscriptions: every 200 is with the provider exactly as accepted; nothing else is.
  let delivered = 0
  let exitCode: number | null
  if (options.provider === "brevo") {
    exitCode = await stopService(service.child)
    const contacts = brevo.contacts()
    for (const [email, locale] of accepted) {
      const contact = contacts.get(email.toLowerCase())
      if (contact === undefined) violate(`subscription ${email} (${locale}) answered 200 but Brevo never got it`)
      else if (contact.email !== email || contact.attributes.LOCALE !== locale || contact.templateId !== TEMPLATES[locale] || !contact.listIds.includes(7)) {
        violate(`subscription ${email} (${locale}) reached Brevo as ${JSON.stringify(contact)}`)
      } else delivered++
    }
    for (const key of contacts.keys()) if (!sentAddresses.has(key)) violate(`Brevo holds ${key}, which was never submitted`)
  } else {
    exitCode = await stopService(service.child) // the list is complete once the process has stopped
    const exported = spawnSync(process.execPath, ["src/cli/subscribers.ts", "export", "--data-dir", dataDir], { cwd: ROOT, encoding: "utf8" })
    if (exported.status !== 0) violate(`subscribers export failed: ${exported.stderr}`)
    const rows = new Map<string, string>()
    for (const line of exported.stdout.split("\n").slice(1)) {
      const [email, locale] = line.split(",")
      if (email !== undefined && email !== "" && locale !== undefined) rows.set(email, locale)
    }
    for (const [email, locale] of accepted) {
      const got = rows.get(email)
      if (got === undefined) violate(`subscription ${email} (${locale}) answered 200 but is not in the local list`)
      else if (got !== locale) violate(`subscription ${email} is in the local list with locale ${got}, accepted as ${locale}`)
      else delivered++
    }
    for (const email of rows.keys()) if (!sentAddresses.has(email)) violate(`the local list holds ${email}, which was never submitted`)
  }
  const serviceLog = service.scanLog()
  for (const line of serviceLog.unhandled) violate(`service logged: ${line}`)
  // C9: one access-log line per request (ours, plus the /openapi.json fetch at the start).
  if (serviceLog.requests !== durations.length + 1) {
    violate(`the access log has ${serviceLog.requests} request lines for ${durations.length + 1} requests answered`)
  }
  if (exitCode !== 0) violate(`SIGTERM: the service exited with ${exitCode}, expected 0\n${serviceLog.tail}`)

  const sorted = [...durations].sort((a, b) => a - b)
  return {
    options,
    requests: durations.length,
    seconds,
    byStatus,
    byKind,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.at(-1) ?? Number.NaN,
    rssMb: { idleBefore: idleBefore.rssKb / 1024, afterWarmup: warm.rssMb, end: atEnd.rssMb, peak: peakRssMb },
    heapUsedMb: { afterWarmup: warm.heapUsedMb, end: atEnd.heapUsedMb },
    fds: { idleBefore: idleBefore.fds, afterWarmup: fdFirst, end: fdLast, idleAfter: idleAfter.fds },
    faultsApplied,
    subscriptions: { accepted: accepted.size, failed: failedSubscriptions, delivered },
    exitCode,
    ...verdicts()
  }
}

export const formatSummary = (s: SoakSummary): string => {
  const statuses = Object.entries(s.byStatus).sort(([a], [b]) => Number(a) - Number(b)).map(([k, v]) => `${k}: ${v}`).join(", ")
  const kinds = Object.entries(s.byKind).map(([k, v]) => `${k}: ${v}`).join(", ")
  const mb = (x: number) => `${x.toFixed(1)} MB`
  return [
    `soak: ${s.requests} requests in ${s.seconds.toFixed(1)} s (${(s.requests / s.seconds).toFixed(0)}/s), ${s.options.concurrency} clients, provider ${s.options.provider}, seed ${s.options.seed}`,
    `  by status: ${statuses}`,
    `  by kind:   ${kinds}`,
    `  latency:   p50 ${s.p50Ms.toFixed(1)} ms, p99 ${s.p99Ms.toFixed(1)} ms, max ${s.maxMs.toFixed(0)} ms`,
    `  RSS:       ${mb(s.rssMb.idleBefore)} idle before; after a forced GC ${mb(s.rssMb.afterWarmup)} after warm-up, ${mb(s.rssMb.end)} at the end (tolerance +${s.options.rssToleranceMb} MB); peak ${mb(s.rssMb.peak)}`,
    `  heap used: after a forced GC ${mb(s.heapUsedMb.afterWarmup)} after warm-up, ${mb(s.heapUsedMb.end)} at the end (tolerance +${s.options.heapToleranceMb} MB)`,
    `  fds:       ${s.fds.idleBefore} idle before, ${s.fds.afterWarmup} after warm-up, ${s.fds.end} at the end, ${s.fds.idleAfter} idle after (tolerance +${s.options.fdTolerance})`,
    `  faults:    ${s.faultsApplied.length === 0 ? "none" : s.faultsApplied.join("; ")}`,
    `  subscriptions: ${s.subscriptions.accepted} accepted (200), ${s.subscriptions.delivered} delivered as accepted, ${s.subscriptions.failed} not accepted`,
    `  SIGTERM exit code: ${s.exitCode}`,
    s.violationCount === 0 ? "  verdict: OK" : `  verdict: ${s.violationCount} violation(s):\n    - ${s.violations.join("\n    - ")}`
  ].join("\n")
}

const parseArgs = (argv: ReadonlyArray<string>): Partial<SoakOptions> => {
  const out: Record<string, unknown> = {}
  const names: Record<string, keyof SoakOptions> = {
    "--duration": "durationS",
    "--warmup": "warmupS",
    "--concurrency": "concurrency",
    "--provider": "provider",
    "--fault-period": "faultPeriodS",
    "--rss-tolerance-mb": "rssToleranceMb",
    "--heap-tolerance-mb": "heapToleranceMb",
    "--fd-tolerance": "fdTolerance",
    "--seed": "seed"
  }
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split("=", 2) as [string, string | undefined]
    const key = names[flag]
    if (key === undefined) throw new Error(`unknown option ${flag}; known: ${Object.keys(names).join(" ")}`)
    const value = inline ?? argv[++i]
    if (value === undefined) throw new Error(`${flag} needs a value`)
    if (key === "provider") {
      if (value !== "brevo" && value !== "local") throw new Error("--provider must be brevo or local")
      out[key] = value
    } else {
      const n = Number(value)
      if (!Number.isFinite(n) || n < 0) throw new Error(`${flag} must be a non-negative number`)
      out[key] = n
    }
  }
  // A short run gets a proportionally short warm-up unless one is given. V8 keeps growing its heap
  // for about half a minute under load, so RSS verdicts of runs much shorter than 120 s are noisy.
  if (out.durationS !== undefined && out.warmupS === undefined) out.warmupS = Math.min(30, Math.max(3, Math.round((out.durationS as number) / 4)))
  return out as Partial<SoakOptions>
}

if (import.meta.main) {
  let options: Partial<SoakOptions>
  try {
    options = parseArgs(process.argv.slice(2))
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`)
    process.exit(2)
  }
  const summary = await runSoak(options)
  process.stdout.write(`${formatSummary(summary)}\n`)
  process.exit(summary.violationCount === 0 ? 0 : 1)
}
