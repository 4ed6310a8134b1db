/**
 * `npm run bench -- --token [--root DIR] [--runs 3] [--duration 10] [--alg ES256]` (issue 34): POST /oauth/token
 * for a client_secret_basic client and a private_key_jwt client, each alone and alternated (one request of
 * each in turn), on the service as `npm start` starts it (from the checkout at DIR: default this one; a
 * checkout without private_key_jwt is measured for the secret method alone).
 *
 * `--compare DIR`: the secret method on this checkout (A) and the one at DIR (B, e.g. the commit a branch
 * started from), both services up, measured in turn A B, B A, ... (compare.ts). Prints the ratio A / B of
 * req/s and CPU per request.
 *
 * wrk cannot sign a JWT, and an assertion is accepted once (its jti): each run that needs assertions gets a
 * pool of distinct ones signed beforehand (`--alg`, default ES256; aud the issuer, exp 5 minutes ahead, a
 * fresh jti each), read by the wrk script from a file and sent each once, in order. A run that would use
 * up its pool fails rather than measure refusals: every measured request must be a 200. The failure limit
 * is raised so that nothing is refused for another reason.
 *
 * The service on --server-cpus (0), wrk on the others, 32 connections, a warm-up of each scenario first;
 * the scenarios' order turns from one run to the next. Reported per scenario: req/s of each run, and their
 * spread (min, median, max), p50/p99 latency, CPU µs per request of the service. JSON in
 * <out>/token-<timestamp>.json.
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { randomUUID } from "node:crypto"
import { availableParallelism, tmpdir } from "node:os"
import { join, resolve } from "node:path"
import * as jose from "jose"
import { fail, fmtInt, HOST, lpad, NODE, pad, ROOT, round } from "./common.ts"
import { median, pairedRatios, sidesInTurn } from "./compare.ts"
import { cleanups, freePort, hasTaskset, pinned, stopChild, tail, track, waitReady } from "./processes.ts"
import { cpuMs } from "./system.ts"
import { runScript, summaryLines, type WrkResult } from "./wrk.ts"
import { childEnv } from "../support/spawn.ts"

type Scenario = "secret" | "private_key_jwt" | "alternated"
type Alg = "ES256" | "RS256" | "PS256" | "EdDSA"

interface TokenOptions {
  readonly root: string
  readonly runs: number
  readonly duration: number
  readonly warmup: number
  readonly connections: number
  readonly alg: Alg
  readonly pool: number
  readonly out: string
  /** Another checkout: the secret method on both services, measured in turn. */
  readonly compare: string | undefined
}

const parse = (argv: ReadonlyArray<string>): TokenOptions => {
  const value = (name: string) => {
    const i = argv.indexOf(`--${name}`)
    return i === -1 ? undefined : argv[i + 1]
  }
  const int = (name: string, fallback: number) => {
    const raw = value(name)
    const n = raw === undefined ? fallback : Number(raw)
    if (!Number.isInteger(n) || n < 1) fail(`--${name} must be a positive integer (got ${raw})`)
    return n
  }
  const alg = (value("alg") ?? "ES256") as Alg
  if (!["ES256", "RS256", "PS256", "EdDSA"].includes(alg)) fail(`--alg must be ES256, RS256, PS256 or EdDSA (got ${alg})`)
  return {
    root: resolve(value("root") ?? ROOT),
    runs: int("runs", 3),
    duration: int("duration", 10),
    warmup: int("warmup", 2),
    connections: int("connections", 32),
    alg,
    pool: int("pool", 60_000),
    out: resolve(ROOT, value("out") ?? "bench-results"),
    compare: value("compare") === undefined ? undefined : resolve(value("compare")!)
  }
}

const FORM = "application/x-www-form-urlencoded"
const luaString = (text: string) => `"${text.replaceAll("\\", "\\\\").replaceAll("\"", "\\\"")}"`

/**
 * The wrk script: the secret client's request (Basic), and the pool's assertions in order, one each;
 * `alternated` sends them in turn. A pool used up is sent again from its start (then refused: a failed run).
 */
const script = (scenario: Scenario, basic: string, poolFile: string | undefined) => [
  "local secret = nil",
  "local pool = {}",
  ...(poolFile === undefined ? [] : [`for line in io.lines(${luaString(poolFile)}) do pool[#pool + 1] = line end`]),
  "local used = 0",
  "local turn = 0",
  "request = function()",
  // Built on the first call, when wrk.headers holds Host.
  `  if secret == nil then secret = wrk.format("POST", "/oauth/token", { ["Content-Type"] = ${luaString(FORM)}, ["Authorization"] = ${luaString(basic)} }, "grant_type=client_credentials") end`,
  "  turn = turn + 1",
  `  if ${scenario === "secret" ? "true" : scenario === "alternated" ? "turn % 2 == 1" : "false"} then return secret end`,
  "  used = used % #pool + 1",
  `  return wrk.format("POST", "/oauth/token", { ["Content-Type"] = ${luaString(FORM)} }, pool[used])`,
  "end",
  ...summaryLines
].join("\n") + "\n"

/** `count` distinct assertions for the client, one form body a line. */
const signPool = async (key: CryptoKey, kid: string, alg: Alg, clientId: string, issuer: string, count: number, file: string) => {
  const now = Math.floor(Date.now() / 1000)
  const lines: Array<string> = []
  for (let i = 0; i < count; i++) {
    const assertion = await new jose.SignJWT({ iss: clientId, sub: clientId, aud: issuer, iat: now, exp: now + 300, jti: randomUUID() })
      .setProtectedHeader({ alg, kid })
      .sign(key)
    lines.push(new URLSearchParams({ grant_type: "client_credentials", client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", client_assertion: assertion }).toString())
  }
  writeFileSync(file, lines.join("\n") + "\n")
}

/** The root's clients CLI: its JSON output, or `undefined` when it refuses (exit 2: an older checkout without the option). */
const clientsCli = (root: string, dataDir: string, args: ReadonlyArray<string>) => {
  const res = spawnSync(NODE, [join(root, "src/cli/clients.ts"), ...args], { cwd: root, env: { ...childEnv, DATA_DIR: dataDir }, encoding: "utf8" })
  if (res.status === 2) return undefined
  if (res.status !== 0) fail(`clients ${args.join(" ")} (in ${root}) failed: ${res.stderr}`)
  return JSON.parse(res.stdout) as Record<string, string>
}

const startService = async (root: string, dataDir: string, cpus: string | undefined) => {
  const port = await freePort()
  const start = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts: { start: string } }).scripts.start
  const args = start.trim().replace(/^exec\s+/, "").split(/\s+/).slice(1)
  const issuer = `http://${HOST}:${port}`
  const env: Record<string, string | undefined> = {
    ...process.env,
    PORT: String(port),
    HOST,
    DATA_DIR: dataDir,
    PUBLIC_BASE_URL: issuer,
    // No upstream is asked: the token endpoint is what is measured.
    COINGECKO_BASE_URL: "http://127.0.0.1:9",
    RATES_FALLBACK: "none",
    COINBASE_WS_URL: "none",
    NEWSLETTER_PROVIDER: "local",
    NODE_ENV: "production",
    OAUTH_MAX_FAILURES_PER_MIN: "10000"
  }
  for (const name of ["REDIS_URL", "DATABASE_URL", "WEB_CONCURRENCY", "OTEL_EXPORTER_OTLP_ENDPOINT"]) delete env[name]
  const argv = pinned(cpus, [NODE, ...args])
  const child = track(spawn(argv[0]!, argv.slice(1), { cwd: root, env, stdio: ["ignore", "ignore", "pipe"] }))
  await waitReady(port, child, "service", tail(child.stderr))
  return { child, port, issuer }
}

interface Target {
  readonly root: string
  readonly service: Awaited<ReturnType<typeof startService>>
  /** The secret client's Authorization header. */
  readonly basic: string
  /** The key client's id; `undefined` when the checkout has no private_key_jwt. */
  readonly keyClient: string | undefined
}

type Measured = WrkResult & { readonly cpuUsPerRequest: number }

const summarise = (runs: ReadonlyArray<Measured>) => {
  const rps = runs.map((r) => r.rps)
  return {
    rps: { min: Math.min(...rps), median: median(rps), max: Math.max(...rps), runs: rps },
    p50Ms: median(runs.map((r) => r.latencyMs.p50)),
    p99Ms: median(runs.map((r) => r.latencyMs.p99)),
    cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest))
  }
}

const line = (name: string, s: ReturnType<typeof summarise>, note = "") =>
  `${pad(name, 22)} ${lpad(fmtInt(s.rps.min), 10)} ${lpad(fmtInt(s.rps.median), 8)} ${lpad(fmtInt(s.rps.max), 8)}  ${lpad(String(s.p50Ms), 6)}  ${lpad(String(s.p99Ms), 7)}  ${lpad(String(s.cpuUsPerRequest), 10)}${note}\n`
const HEADER = `\n${pad("", 22)} ${lpad("req/s min", 10)} ${lpad("median", 8)} ${lpad("max", 8)}  p50 ms   p99 ms  CPU µs/req\n`

export const runTokenMode = async (argv: ReadonlyArray<string>) => {
  const opts = parse(argv)
  const pin = hasTaskset() && availableParallelism() >= 2
  const serverCpus = pin ? "0" : undefined
  const wrkOptions = { connections: opts.connections, threads: 1, loadCpus: pin ? (availableParallelism() > 2 ? `1-${availableParallelism() - 1}` : "1") : undefined }
  const tmp = mkdtempSync(join(tmpdir(), "bench-token-"))
  cleanups.push(() => rmSync(tmp, { recursive: true, force: true }))
  const { privateKey, publicKey } = await jose.generateKeyPair(opts.alg === "EdDSA" ? "Ed25519" : opts.alg, { extractable: true })
  const jwksFile = join(tmp, "jwks.json")
  writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await jose.exportJWK(publicKey)), kid: "bench-key", use: "sig" }] }))

  /** A checkout's service on a DATA_DIR of its own, with a secret client and (when it can) a key client. */
  const prepare = async (root: string): Promise<Target> => {
    const dataDir = mkdtempSync(join(tmp, "data-"))
    const secret = clientsCli(root, dataDir, ["create", "--name", "bench secret", "--scope", "rates:read"])!
    const keyed = clientsCli(root, dataDir, ["create", "--name", "bench key", "--scope", "rates:read", "--jwks-file", jwksFile])
    const service = await startService(root, dataDir, serverCpus)
    cleanups.push(() => void stopChild(service.child))
    return { root, service, basic: `Basic ${Buffer.from(`${secret.client_id}:${secret.client_secret}`).toString("base64")}`, keyClient: keyed?.client_id }
  }

  const measure = async (target: Target, scenario: Scenario, seconds: number, measured: boolean): Promise<Measured> => {
    const { service } = target
    let poolFile: string | undefined
    const poolSize = measured ? opts.pool : Math.ceil(opts.pool / 4)
    if (scenario !== "secret") {
      poolFile = join(tmp, `pool-${randomUUID()}.txt`)
      await signPool(privateKey, "bench-key", opts.alg, target.keyClient!, service.issuer, poolSize, poolFile)
    }
    const file = join(tmp, `${scenario}.lua`)
    writeFileSync(file, script(scenario, target.basic, poolFile))
    const cpu0 = cpuMs(service.child.pid!) ?? 0
    const result = await runScript(wrkOptions, file, `http://${HOST}:${service.port}/oauth/token`, seconds)
    const cpu = (cpuMs(service.child.pid!) ?? 0) - cpu0
    if (poolFile !== undefined) rmSync(poolFile)
    const assertionsSent = scenario === "alternated" ? Math.floor(result.requests / 2) : scenario === "private_key_jwt" ? result.requests : 0
    if (result.errors.status > 0 || result.errors.timeout > 0) {
      const hint = assertionsSent > poolSize ? `: the pool of ${poolSize} assertions was used up, raise --pool` : ""
      fail(`${scenario}: ${result.errors.status} answers were not 200, ${result.errors.timeout} timed out${hint}`)
    }
    return { ...result, cpuUsPerRequest: round((cpu * 1000) / Math.max(1, result.requests), 1) }
  }
  const report = (label: string, run: number, result: Measured) =>
    process.stdout.write(`  run ${run + 1} ${pad(label, 22)} ${lpad(fmtInt(result.rps), 7)} req/s  p50 ${result.latencyMs.p50} ms  p99 ${result.latencyMs.p99} ms  ${result.cpuUsPerRequest} µs CPU/req\n`)
  const settings = `${opts.connections} connections, ${opts.runs} runs of ${opts.duration} s (warm-up ${opts.warmup} s), server on CPU ${serverCpus ?? "any"}, wrk on CPU ${wrkOptions.loadCpus ?? "any"}`
  const stamp = new Date().toISOString().replace(/\.\d+Z$/, "Z").replaceAll(":", "-")
  mkdirSync(opts.out, { recursive: true })

  if (opts.compare !== undefined) {
    // The secret method on two checkouts, both running, measured in turn (A B B A ...): one drift, both sides.
    const [a, b] = [await prepare(ROOT), await prepare(opts.compare)]
    process.stdout.write(`bench --token --compare: client_secret_basic on ${a.root} (A) and ${b.root} (B); ${settings}\n`)
    const runs = { a: [] as Array<Measured>, b: [] as Array<Measured> }
    for (const target of [a, b]) await measure(target, "secret", opts.warmup, false)
    for (let run = 0; run < opts.runs; run++) {
      for (const side of sidesInTurn(run)) {
        const result = await measure(side === "a" ? a : b, "secret", opts.duration, true)
        runs[side].push(result)
        report(`secret ${side.toUpperCase()}`, run, result)
      }
    }
    const [sa, sb] = [summarise(runs.a), summarise(runs.b)]
    process.stdout.write(HEADER + line("secret A (this)", sa) + line("secret B (compared)", sb))
    // Each run's A and B were measured back to back: the median of their ratios is what drift disturbs least.
    const paired = (f: (m: Measured) => number) => pairedRatios(runs.a, runs.b, f).median
    process.stdout.write(
      `A / B, median of the ${opts.runs} back-to-back pairs: req/s ${paired((m) => m.rps)}, CPU per request ${paired((m) => m.cpuUsPerRequest)} ` +
        `(medians of all runs: ${round(sa.rps.median / sb.rps.median, 3)}, ${round(sa.cpuUsPerRequest / sb.cpuUsPerRequest, 3)})\n`
    )
    const file = join(opts.out, `token-compare-${stamp}.json`)
    writeFileSync(file, JSON.stringify({ a: { root: a.root, ...sa, runs: runs.a }, b: { root: b.root, ...sb, runs: runs.b } }, null, 2))
    process.stdout.write(`\nresults: ${file}\n`)
    return
  }

  const target = await prepare(opts.root)
  const scenarios: ReadonlyArray<Scenario> = target.keyClient === undefined ? ["secret"] : ["secret", "private_key_jwt", "alternated"]
  process.stdout.write(
    `bench --token: service of ${opts.root}; ${settings}; assertions ${opts.alg}` +
      `${target.keyClient === undefined ? "; this checkout has no private_key_jwt: the secret method alone" : ""}\n`
  )
  const results = new Map<Scenario, Array<Measured>>(scenarios.map((s) => [s, []]))
  for (const scenario of scenarios) await measure(target, scenario, opts.warmup, false)
  for (let run = 0; run < opts.runs; run++) {
    // The order turns from run to run, so that a drifting load favours no scenario.
    const order = scenarios.map((_, i) => scenarios[(i + run) % scenarios.length]!)
    for (const scenario of order) {
      const result = await measure(target, scenario, opts.duration, true)
      results.get(scenario)!.push(result)
      report(scenario, run, result)
    }
  }
  const summary = scenarios.map((scenario) => ({ scenario, ...summarise(results.get(scenario)!) }))
  process.stdout.write(HEADER)
  for (const s of summary) {
    // Alternated: half the requests are each method's.
    process.stdout.write(line(s.scenario, s, s.scenario === "alternated" ? `   (each method ${fmtInt(s.rps.median / 2)} req/s)` : ""))
  }
  const file = join(opts.out, `token-${stamp}.json`)
  writeFileSync(file, JSON.stringify({ root: opts.root, alg: opts.alg, connections: opts.connections, duration: opts.duration, summary, runs: Object.fromEntries(results) }, null, 2))
  process.stdout.write(`\nresults: ${file}\n`)
}
