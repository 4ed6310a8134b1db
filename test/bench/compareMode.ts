/**
 * `npm run bench -- --compare DIR [--runs 3] [--in-turn] [--scenarios ...] [--duration 10]`: this checkout's
 * service (A) and the one of the checkout at DIR (B, e.g. the commit a branch started from: `git worktree
 * add --detach DIR <commit>`, `npm ci` there), both started as `npm start` starts them, with the same Node,
 * server CPU, upstream emulator and settings as the scenarios of bench.ts. Each run starts both afresh (in
 * turn: A first, then B first, ...), then measures each scenario on both at once: each side its own wrk, the
 * two services sharing the server CPU, so that whatever else loads the machine loads both in the same
 * instant. `--in-turn`: one side after the other instead (A B, then B A, ...: compare.ts), each alone on
 * the CPU as in the single-service bench, which only a quiet machine can tell apart by a few per cent: on
 * a shared 2-core machine (load 5-12), an A/A comparison (this checkout against itself) in turn gave
 * medians of 0.92-1.23 over 11 runs, at once 0.96-1.01 over 7.
 *
 * Reported per scenario: CPU µs per request of A and of B (medians of the runs), and A / B of CPU per
 * request and of req/s: each run's pair, their median, quartiles and extremes. CPU per request is the
 * figure to read; req/s moves with whatever else runs. JSON in <out>/compare-<timestamp>.json.
 */
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import { startCoinbaseEmulator } from "../emulators/coinbase.ts"
import { fail, fmtInt, HOST, lpad, pad, ROOT } from "./common.ts"
import { median, pairedRatios, type Side, sidesInTurn } from "./compare.ts"
import { measure } from "./measure.ts"
import type { Options } from "./options.ts"
import { cleanups, stopChild } from "./processes.ts"
import type { Measured } from "./report.ts"
import { type ScenarioDef, scenarioDefs } from "./scenarios.ts"
import { captureFixtures, type Server, startService } from "./servers.ts"
import type { Upstream } from "./upstream.ts"

export const runCompareMode = async (opts: Options, tmp: string, upstream: Upstream, stamp: string) => {
  const roots: Record<Side, string> = { a: ROOT, b: opts.compare! }
  if (!existsSync(join(roots.b, "package.json")) || !existsSync(join(roots.b, "node_modules"))) {
    fail(`--compare ${roots.b}: not a checkout with its node_modules (git worktree add --detach DIR <commit>; npm ci in DIR)`)
  }
  const scenarios = scenarioDefs.filter((s) => opts.scenarios.includes(s.name))
  // As the scenarios of bench.ts run: live quotes from the Coinbase emulator's feed, unless --no-feed.
  const coinbase = opts.feed ? await startCoinbaseEmulator({ host: HOST }) : undefined
  if (coinbase !== undefined) cleanups.push(() => void coinbase.close())
  const env = coinbase === undefined ? {} : { RATES_FALLBACK: "coinbase", COINBASE_BASE_URL: coinbase.url, COINBASE_WS_URL: coinbase.wsUrl }

  const start = async (side: Side): Promise<Server> => {
    const dataDir = mkdtempSync(join(tmp, `data-${side}-`))
    const service = await startService({ root: roots[side], serverCpus: opts.serverCpus, dataDir, upstreamUrl: upstream.url, logPath: join(tmp, `service-${side}.log`), profDir: undefined, env })
    // Warms the rates answer and checks each scenario's status on this side.
    await captureFixtures(service.port, scenarioDefs)
    return service
  }
  process.stdout.write(
    `bench --compare: A ${roots.a}, B ${roots.b}; ${scenarios.length} scenarios, ${opts.runs} runs, both sides ${opts.inTurn ? "in turn (A B, B A, ...)" : "at once"}, ` +
      `${opts.connections} connections, warm-up ${opts.warmup} s + ${opts.duration} s per run; servers on CPU ${opts.serverCpus ?? "any"}, wrk on CPU ${opts.loadCpus ?? "any"}\n`
  )

  // Each side's wrk scripts in a directory of its own: two wrk runs at once must not share a script file.
  const wrkDirs: Record<Side, string> = { a: mkdtempSync(join(tmp, "wrk-a-")), b: mkdtempSync(join(tmp, "wrk-b-")) }
  const measurePair = async (services: Record<Side, Server>, s: ScenarioDef, run: number): Promise<Record<Side, Measured>> => {
    if (!opts.inTurn) {
      const [a, b] = await Promise.all([measure(opts, wrkDirs.a, services.a, s), measure(opts, wrkDirs.b, services.b, s)])
      return { a, b }
    }
    const pair = {} as Record<Side, Measured>
    for (const side of sidesInTurn(run)) pair[side] = await measure(opts, wrkDirs[side], services[side], s)
    return pair
  }

  const results = new Map(scenarios.map((s) => [s.name, { a: [] as Array<Measured>, b: [] as Array<Measured> }]))
  for (let run = 0; run < opts.runs; run++) {
    // New processes each run, started in turn: two processes of the same code may differ by several per cent
    // for as long as they live, so each run's pair is two fresh processes and the median is over processes too.
    const services = {} as Record<Side, Server>
    for (const side of sidesInTurn(run)) services[side] = await start(side)
    process.stdout.write(`  run ${run + 1}: A pid ${services.a.child.pid}, B pid ${services.b.child.pid}\n`)
    for (const s of scenarios) {
      const pair = await measurePair(services, s, run)
      for (const side of ["a", "b"] as const) {
        const m = pair[side]
        results.get(s.name)![side].push(m)
        process.stdout.write(
          `  run ${run + 1} ${pad(s.label, 27)} ${side.toUpperCase()}  ${lpad(fmtInt(m.wrk.rps), 7)} req/s  ${lpad(m.cpuUsPerRequest.toFixed(1), 6)} µs CPU/req  ${m.statusCheck}\n`
        )
      }
    }
    await Promise.all([stopChild(services.a.child), stopChild(services.b.child)])
  }

  const rows = scenarios.map((s) => {
    const { a, b } = results.get(s.name)!
    return {
      name: s.name,
      label: s.label,
      cpuUsPerRequest: { a: median(a.map((m) => m.cpuUsPerRequest)), b: median(b.map((m) => m.cpuUsPerRequest)) },
      cpuRatio: pairedRatios(a, b, (m) => m.cpuUsPerRequest),
      rpsRatio: pairedRatios(a, b, (m) => m.wrk.rps),
      checks: [...a, ...b].map((m) => m.statusCheck).filter((c) => c !== "ok"),
      runs: { a, b }
    }
  })
  const range = (from: number, to: number) => `${from.toFixed(3)}-${to.toFixed(3)}`
  const head = `${pad("scenario", 27)}${lpad("CPU µs/req A", 13)}${lpad("B", 7)}   A/B CPU: ${lpad("median", 6)}${lpad("quartiles", 13)}${lpad("min-max", 13)}   ${lpad("A/B req/s", 9)}  check`
  const lines = [head, "-".repeat(head.length + 4)]
  for (const r of rows) {
    const c = r.cpuRatio
    lines.push(
      `${pad(r.label, 27)}${lpad(r.cpuUsPerRequest.a.toFixed(1), 13)}${lpad(r.cpuUsPerRequest.b.toFixed(1), 7)}   ${" ".repeat(9)}${lpad(c.median.toFixed(3), 6)}` +
        `${lpad(range(c.q1, c.q3), 13)}${lpad(range(c.min, c.max), 13)}   ${lpad(r.rpsRatio.median.toFixed(3), 9)}  ${r.checks.length === 0 ? "ok" : r.checks.join("; ")}`
    )
  }
  lines.push("", "A/B CPU per run, in run order:", ...rows.map((r) => `${pad(r.label, 27)}${r.cpuRatio.runs.map((x) => x.toFixed(3)).join(" ")}`))
  process.stdout.write(
    `\n${lines.join("\n")}\n\nA = ${roots.a}, B = ${roots.b}. CPU µs/req: the server's user + system CPU time over the run / its requests, ` +
      `median of the runs. A/B per run: the run's pair, measured ${opts.inTurn ? "back to back" : "at once"}; their median, quartiles and extremes.\n`
  )
  const file = join(opts.out, `compare-${stamp}.json`)
  writeFileSync(file, `${JSON.stringify({ a: roots.a, b: roots.b, inTurn: opts.inTurn, runs: opts.runs, durationSec: opts.duration, warmupSec: opts.warmup, connections: opts.connections, scenarios: rows }, null, 2)}\n`)
  process.stdout.write(`\nwrote ${relative(ROOT, file)}\n`)
}
