/**
 * `npm run bench -- --refresh` (issue 13): a popular cached rates answer under load while its upstream is
 * slow. Its callers must never wait for a refresh: p99 under 10 ms.
 *
 * The service runs with COINGECKO_LATEST_TTL_S=5 (the latest price's lifetime; 60 s by default), the cached
 * answer is warmed, then the emulator answers every call after 2 s and wrk drives the `rates` scenario for
 * --duration seconds (at least four lifetimes, so several refreshes fall inside the run). Reported: req/s,
 * latency percentiles, responses other than 200, and the upstream calls made during the run (the refreshes).
 * Results: a table on stdout, JSON in <out>/refresh-<timestamp>.json and refresh-latest.json.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fail, fmtInt, ROOT } from "./common.ts"
import type { Options } from "./options.ts"
import { call, stopChild } from "./processes.ts"
import { RATES_BODY, scenarioDefs } from "./scenarios.ts"
import { startService } from "./servers.ts"
import type { Upstream } from "./upstream.ts"
import { runWrk } from "./wrk.ts"

const rates = scenarioDefs.find((s) => s.name === "rates")!
const LIFETIME_SECONDS = 5
const UPSTREAM_DELAY_MS = 2_000
const P99_CEILING_MS = 10

export const runRefreshMode = async (opts: Options, tmp: string, upstream: Upstream, stamp: string) => {
  if (upstream.setLatency === undefined) fail("--refresh needs the in-process CoinGecko emulator (its latency control)")
  const seconds = Math.max(opts.duration, 4 * LIFETIME_SECONDS)
  const dataDir = join(tmp, "refresh-mode")
  mkdirSync(dataDir, { recursive: true })
  const service = await startService({
    serverCpus: opts.serverCpus,
    dataDir,
    upstreamUrl: upstream.url,
    logPath: join(tmp, "refresh-mode.log"),
    profDir: undefined,
    env: { COINGECKO_LATEST_TTL_S: String(LIFETIME_SECONDS) }
  })
  try {
    const warm = await call(service.port, "POST", rates.path, RATES_BODY, { "content-type": "application/json" })
    if (warm.status !== 200) fail(`refresh mode: warm-up exchange-rates request: ${warm.status} ${warm.body.toString("utf8").slice(0, 300)}`)
    upstream.setLatency("/", UPSTREAM_DELAY_MS)
    const callsBefore = await upstream.totalCalls()
    process.stdout.write(
      `refresh mode: ${rates.label}, latest price lifetime ${LIFETIME_SECONDS} s, upstream answering after ${UPSTREAM_DELAY_MS} ms, ` +
        `wrk for ${seconds} s...`
    )
    const wrk = await runWrk(opts, tmp, { port: service.port, scenarios: [rates], seconds })
    // Calls still in flight at the end are counted once they are answered.
    await new Promise((resolve) => setTimeout(resolve, UPSTREAM_DELAY_MS + 500))
    const upstreamCalls = (await upstream.totalCalls()) - callsBefore
    const met = wrk.latencyMs.p99 < P99_CEILING_MS && wrk.errors.status === 0
    process.stdout.write(
      ` ${fmtInt(wrk.rps)} req/s\n` +
        `latency ms: p50 ${wrk.latencyMs.p50}, p90 ${wrk.latencyMs.p90}, p99 ${wrk.latencyMs.p99}, p99.9 ${wrk.latencyMs.p999}, max ${wrk.latencyMs.max}; ` +
        `non-2xx ${wrk.errors.status}; upstream calls during the run ${upstreamCalls}\n` +
        `p99 under ${P99_CEILING_MS} ms with every answer 200: ${met ? "met" : "NOT met"}\n`
    )
    const json = `${JSON.stringify({ startedAt: new Date().toISOString(), node: process.version, lifetimeSeconds: LIFETIME_SECONDS, upstreamDelayMs: UPSTREAM_DELAY_MS, seconds, upstreamCalls, met, wrk }, null, 2)}\n`
    const file = join(opts.out, `refresh-${stamp}.json`)
    writeFileSync(file, json)
    writeFileSync(join(opts.out, "refresh-latest.json"), json)
    process.stdout.write(`wrote ${relative(ROOT, file)} and ${relative(ROOT, join(opts.out, "refresh-latest.json"))}\n`)
  } finally {
    upstream.setLatency("/", 0)
    await stopChild(service.child, 15_000)
  }
}
