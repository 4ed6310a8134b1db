/**
 * The three servers of a bench run, each a child process pinned on the server CPUs:
 *   - the service, started as `npm start` starts it (the start script's flags, on node_modules/.bin/node);
 *   - the raw `node:http` baseline (baseline.ts), replaying the bytes the service answered;
 *   - the Fastify peer (fastify/server.ts), the same contract as a Node team would ship it, built from the
 *     service's /openapi.json schemas, its problem catalogue and its cached rates answer.
 * Each peer's answers are checked against the service's before anything is measured. The stream mode's raw
 * baseline (streamRaw.ts) is started here too, with the start script's flags.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, openSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { ProblemCatalogue } from "../../src/api/problems.ts"
import type { BaselineFixture } from "./baseline.ts"
import { fail, HIGH_LIMIT, HOST, MAX_BODY_BYTES, NODE, ROOT } from "./common.ts"
import type { PeerContract } from "./fastify/server.ts"
import { call, type Captured, freePort, pinned, tail, track, waitReady } from "./processes.ts"
import type { ServerName } from "./report.ts"
import { RATES_BODY, type ScenarioDef } from "./scenarios.ts"

export interface Server {
  readonly name: ServerName
  readonly port: number
  readonly child: ChildProcess
}

/**
 * The service's environment besides its address: high limits (the limiter runs, nobody is refused), the
 * single in-memory process whatever the shell exports (`npm test` users often have REDIS_URL and
 * DATABASE_URL set): the Redis mode sets its own; and CoinGecko alone, no call to Coinbase (no second
 * source, no live quotes): the month-real mode points both at the Coinbase emulator.
 */
export const serviceSettings: Readonly<Record<string, string | undefined>> = {
  RATES_FALLBACK: "none",
  COINBASE_WS_URL: "none",
  RATE_LIMIT_RATES_PER_MIN: String(HIGH_LIMIT),
  RATE_LIMIT_SUBSCRIBE_PER_MIN: String(HIGH_LIMIT),
  NEWSLETTER_PROVIDER: "local",
  NODE_ENV: "production",
  REDIS_URL: undefined,
  DATABASE_URL: undefined,
  WEB_CONCURRENCY: undefined,
  OTEL_EXPORTER_OTLP_ENDPOINT: undefined
}

/** The service is started as `npm start` starts it: the arguments of package.json's start script after `node`. */
const startArguments = (root: string): Array<string> => {
  const start = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts: { start: string } }).scripts.start
  // `exec` makes the shell npm runs the script in become node (SIGTERM reaches it): not part of the command.
  const [command, ...args] = start.trim().replace(/^exec\s+/, "").split(/\s+/)
  if (command !== "node" || !args.includes("src/main.ts")) fail(`package.json start script is not "[exec] node [flags] src/main.ts": ${start}`)
  return args
}

export interface ServiceStart {
  /** The checkout whose service runs (compareMode.ts: another one); default this one. */
  readonly root?: string | undefined
  readonly serverCpus: string | undefined
  readonly dataDir: string
  readonly upstreamUrl: string
  /** Where its stdout (one access-log line per request) goes. */
  readonly logPath: string
  /** `--cpu-prof` into this directory. */
  readonly profDir: string | undefined
  /** More variables (the Redis mode: REDIS_URL, WEB_CONCURRENCY, limits; Coinbase's URLs), over `serviceSettings`; `undefined` unsets one. */
  readonly env?: Readonly<Record<string, string | undefined>>
}

/** The stream mode's raw baseline (streamRaw.ts): the same Node, the start script's flags, the same CPUs, over the same feed. */
export const startRawStream = async (serverCpus: string | undefined, coinbaseWsUrl: string): Promise<{ readonly child: ChildProcess; readonly port: number }> => {
  const port = await freePort()
  const args = startArguments(ROOT).map((a) => (a === "src/main.ts" ? "test/bench/streamRaw.ts" : a))
  const argv = pinned(serverCpus, [NODE, ...args])
  const child = track(spawn(argv[0]!, argv.slice(1), { cwd: ROOT, env: { ...process.env, PORT: String(port), NODE_ENV: "production", COINBASE_WS_URL: coinbaseWsUrl }, stdio: ["ignore", "ignore", "pipe"] }))
  await waitReady(port, child, "raw stream server", tail(child.stderr))
  return { child, port }
}

export const startService = async (o: ServiceStart): Promise<Server> => {
  const port = await freePort()
  const logFd = openSync(o.logPath, "w")
  const root = o.root ?? ROOT
  const argv = pinned(o.serverCpus, [NODE, ...(o.profDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${o.profDir}`]), ...startArguments(root)])
  const env: Record<string, string | undefined> = { ...process.env, ...serviceSettings, ...o.env, PORT: String(port), HOST, DATA_DIR: o.dataDir, PUBLIC_BASE_URL: `http://${HOST}:${port}`, COINGECKO_BASE_URL: o.upstreamUrl }
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete env[name]
  const child = track(spawn(argv[0]!, argv.slice(1), { cwd: root, env, stdio: ["ignore", logFd, "pipe"] }))
  closeSync(logFd)
  await waitReady(port, child, "service", tail(child.stderr))
  return { name: "service", port, child }
}

const lowerKeys = (headers: Readonly<Record<string, string>>) => Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]))

export const ask = (port: number, s: ScenarioDef) => call(port, s.method, s.path, s.body, lowerKeys(s.headers))

/** Warms the rates cache, then captures each scenario's exact answer from the service. */
export const captureFixtures = async (port: number, defs: ReadonlyArray<ScenarioDef>): Promise<Array<BaselineFixture>> => {
  const first = await call(port, "POST", "/api/v1/exchange-rates", RATES_BODY, { "content-type": "application/json" })
  if (first.status !== 200) fail(`warm-up exchange-rates request: ${first.status} ${first.body.toString("utf8")}`)
  const fixtures: Array<BaselineFixture> = []
  for (const s of defs) {
    const res = await ask(port, s)
    if (res.status !== s.expectStatus) fail(`${s.label}: expected ${s.expectStatus}, got ${res.status}: ${res.body.toString("utf8").slice(0, 500)}`)
    if (s.name === "rates") {
      const body = JSON.parse(res.body.toString("utf8")) as { stale?: unknown; rates?: Array<unknown> }
      if (body.stale !== false || body.rates?.length !== 3) fail(`exchange-rates warm answer is not a fresh 3-coin answer: ${res.body.toString("utf8").slice(0, 300)}`)
    }
    fixtures.push({
      method: s.method,
      path: s.path,
      ...(s.body === undefined ? {} : { requestBody: s.body }),
      status: res.status,
      headers: res.headers,
      body: res.body.toString("base64"),
      ...(s.name === "health" ? { dynamic: "health" as const } : {})
    })
  }
  return fixtures
}

const keysOf = (body: Buffer) => {
  try {
    return Object.keys(JSON.parse(body.toString("utf8")) as object).join(",")
  } catch {
    return `(not JSON: ${body.toString("utf8").slice(0, 80)})`
  }
}
const header = (h: ReadonlyArray<readonly [string, string]>, name: string) => h.find(([n]) => n === name)?.[1]
const mediaType = (h: ReadonlyArray<readonly [string, string]>) => header(h, "content-type")?.split(";")[0]?.trim()

const startPeer = async (name: "baseline" | "fastify", serverCpus: string | undefined, script: string, input: string): Promise<Server> => {
  const port = await freePort()
  const argv = pinned(serverCpus, [NODE, join(ROOT, script), input])
  // stdout discarded: the Fastify peer's pino request logs are written (logging on) to /dev/null.
  const child = track(spawn(argv[0]!, argv.slice(1), { cwd: ROOT, env: { ...process.env, PORT: String(port), NODE_ENV: "production" }, stdio: ["ignore", "ignore", "pipe"] }))
  await waitReady(port, child, name, tail(child.stderr))
  return { name, port, child }
}

/** The raw baseline, checked: status, header names in order, body bytes (health: its members). */
export const startBaseline = async (serverCpus: string | undefined, tmp: string, fixtures: ReadonlyArray<BaselineFixture>, defs: ReadonlyArray<ScenarioDef>) => {
  const file = join(tmp, "fixtures.json")
  writeFileSync(file, JSON.stringify(fixtures, null, 1))
  const server = await startPeer("baseline", serverCpus, "test/bench/baseline.ts", file)
  for (const [i, s] of defs.entries()) {
    const want = fixtures[i]!
    const got = await ask(server.port, s)
    const names = (h: ReadonlyArray<readonly [string, string]>) => h.map(([n]) => n).join(",")
    const wantBody = Buffer.from(want.body, "base64")
    const sameBody = s.name === "health" ? keysOf(got.body) === keysOf(wantBody) : got.body.equals(wantBody)
    if (got.status !== want.status || names(got.headers) !== names(want.headers) || !sameBody) {
      fail(`baseline answer differs for ${s.label}: ${got.status} [${names(got.headers)}] vs ${want.status} [${names(want.headers)}]`)
    }
  }
  return server
}

/** What the Fastify peer takes from the service: schemas from its /openapi.json, the problem catalogue, the cached answer. */
const peerContract = async (servicePort: number, fixtures: ReadonlyArray<BaselineFixture>): Promise<PeerContract> => {
  const doc = await call(servicePort, "GET", "/openapi.json")
  if (doc.status !== 200) fail(`GET /openapi.json on the service: ${doc.status}`)
  const schemas = (JSON.parse(doc.body.toString("utf8")) as { components: { schemas: Record<string, object> } }).components.schemas
  const schema = (name: string) => schemas[name] ?? fail(`the service's /openapi.json has no components.schemas.${name}`)
  const health = fixtures.find((f) => f.dynamic === "health")
  const rates = fixtures.filter((f) => f.method === "POST" && f.path === "/api/v1/exchange-rates" && f.status === 200 && f.requestBody !== undefined)
  return {
    environment: health === undefined ? "development" : (JSON.parse(Buffer.from(health.body, "base64").toString("utf8")) as { environment: string }).environment,
    problems: ProblemCatalogue,
    schemas: { exchangeRatesRequest: schema("ExchangeRatesRequest"), subscribeRequest: schema("SubscribeRequest"), healthResponse: schema("HealthResponse") },
    rateLimits: { rates: HIGH_LIMIT, subscribe: HIGH_LIMIT },
    maxBodyBytes: MAX_BODY_BYTES,
    ratesAnswers: rates.map((f) => ({ requestBody: f.requestBody!, body: f.body }))
  }
}

/**
 * The Fastify peer, checked: same status, media type and Allow; the cached answer byte for byte; health
 * and problems with the same members in the same order and the same code, title and status.
 */
export const startFastify = async (serverCpus: string | undefined, tmp: string, servicePort: number, fixtures: ReadonlyArray<BaselineFixture>, defs: ReadonlyArray<ScenarioDef>) => {
  const file = join(tmp, "fastify-contract.json")
  writeFileSync(file, JSON.stringify(await peerContract(servicePort, fixtures)))
  const server = await startPeer("fastify", serverCpus, "test/bench/fastify/server.ts", file)
  for (const [i, s] of defs.entries()) {
    const want = fixtures[i]!
    const wantBody = Buffer.from(want.body, "base64")
    const got: Captured = await ask(server.port, s)
    const differs: Array<string> = []
    if (got.status !== want.status) differs.push(`status ${got.status} vs ${want.status}`)
    if (mediaType(got.headers) !== mediaType(want.headers)) differs.push(`content-type ${mediaType(got.headers)} vs ${mediaType(want.headers)}`)
    if (header(got.headers, "allow") !== header(want.headers, "allow")) differs.push(`allow ${header(got.headers, "allow")} vs ${header(want.headers, "allow")}`)
    if (s.name === "rates") {
      if (!got.body.equals(wantBody)) differs.push("body bytes")
    } else if (keysOf(got.body) !== keysOf(wantBody)) {
      differs.push(`members [${keysOf(got.body)}] vs [${keysOf(wantBody)}]`)
    } else if (want.status >= 400) {
      const [a, b] = [got.body, wantBody].map((x) => JSON.parse(x.toString("utf8")) as { code: string; title: string; status: number })
      if (a!.code !== b!.code || a!.title !== b!.title || a!.status !== b!.status) differs.push(`problem ${a!.code}/${a!.title} vs ${b!.code}/${b!.title}`)
    }
    if (differs.length > 0) fail(`Fastify peer's answer differs for ${s.label}: ${differs.join("; ")}\n${got.body.toString("utf8").slice(0, 400)}`)
  }
  return server
}
