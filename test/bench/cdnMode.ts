/**
 * `npm run bench -- --cdn [--seconds 10]` (issue 42): GET /api/v1/rates with and without a caching proxy in front
 * (Debian's nginx with the configuration of docs/cdn.md, test/support/nginx.ts), at 100 and at 1,000 visits a
 * second: the landing page's three queries in turn from 200 addresses (sockets bound to 127.0.x.y; TRUST_PROXY
 * names the proxy). The service as `npm start` runs it (servers.ts), over the CoinGecko emulator (upstream.ts)
 * and the Coinbase emulator with its feed (live quotes). For each run: origin requests per visit (the service's
 * own count, METRICS_PORT), the oldest price served (receipt less the answer's asOf, whole seconds), the
 * visits by status, and how long a visit took (median, p99).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fail, fmtInt, round } from "./common.ts"
import { freePort, stopChild } from "./processes.ts"
import { startService } from "./servers.ts"
import { startUpstream } from "./upstream.ts"
import { startCoinbaseEmulator } from "../emulators/coinbase.ts"
import { closeVisitors, driveVisits, priceAgeSeconds, requestsServed, type Visit, warmUpLanding } from "../support/cdn.ts"
import { startCachingProxy } from "../support/nginx.ts"

const ADDRESSES = 200
const RATES = [100, 1_000]

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0

export const runCdnMode = async (argv: ReadonlyArray<string>) => {
  const i = argv.indexOf("--seconds")
  const seconds = i === -1 ? 10 : Number(argv[i + 1])
  if (!(Number.isInteger(seconds) && seconds >= 1 && seconds <= 600)) fail("--seconds: an integer in 1..600")
  const upstream = await startUpstream(undefined)
  const coinbase = await startCoinbaseEmulator({ host: "127.0.0.1" })
  const dataDir = mkdtempSync(join(tmpdir(), "bench-cdn-"))
  const metricsPort = await freePort()
  const service = await startService({
    serverCpus: undefined,
    dataDir,
    upstreamUrl: upstream.url,
    logPath: "/dev/null",
    profDir: undefined,
    // As shipped (live quotes, Coinbase as second source, the default limits), the proxy trusted.
    env: {
      TRUST_PROXY: "127.0.0.1/32",
      METRICS_PORT: String(metricsPort),
      RATES_FALLBACK: "coinbase",
      COINBASE_BASE_URL: coinbase.url,
      COINBASE_WS_URL: coinbase.wsUrl,
      RATE_LIMIT_RATES_PER_MIN: undefined
    }
  })
  const origin = `http://127.0.0.1:${service.port}`
  const proxy = await startCachingProxy(`127.0.0.1:${service.port}`)
  try {
    process.stdout.write(`cdn mode: GET /api/v1/rates, the landing page's 3 queries from ${ADDRESSES} addresses, ${seconds} s per run\n`)
    await warmUpLanding(origin)
    const rows: Array<Array<string>> = []
    for (const perSecond of RATES) {
      for (const [name, url] of [["origin alone", origin], ["nginx in front", proxy.url]] as const) {
        const total = perSecond * seconds
        const before = await requestsServed(metricsPort)
        const started = Date.now()
        const visits: ReadonlyArray<Visit> = await driveVisits(url, { total, durationMs: seconds * 1_000, addresses: ADDRESSES })
        const took = (Date.now() - started) / 1_000
        const originRequests = (await requestsServed(metricsPort)) - before
        const byStatus: Record<string, number> = {}
        for (const v of visits) byStatus[v.status] = (byStatus[v.status] ?? 0) + 1
        const ok = visits.filter((v) => v.status === 200)
        const oldest = Math.max(0, ...ok.map(priceAgeSeconds))
        const latencies = visits.map((v, n) => v.at - (started + (n * seconds * 1_000) / total)).sort((a, b) => a - b)
        rows.push([
          `${fmtInt(perSecond)}/s`,
          name,
          fmtInt(total),
          `${round(total / took, 0)}/s`,
          fmtInt(originRequests),
          String(round(originRequests / total, 4)),
          `${round(oldest, 1)} s`,
          JSON.stringify(byStatus),
          `${round(quantile(latencies, 0.5), 1)} / ${round(quantile(latencies, 0.99), 1)} ms`
        ])
        closeVisitors()
      }
    }
    const header = ["visits", "in front", "sent", "achieved", "origin requests", "per visit", "oldest price", "statuses", "visit median / p99"]
    const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)))
    const line = (cells: ReadonlyArray<string>) => `| ${cells.map((cell, c) => cell.padEnd(widths[c]!)).join(" | ")} |\n`
    process.stdout.write(line(header) + line(widths.map((w) => "-".repeat(w))) + rows.map(line).join(""))
  } finally {
    closeVisitors()
    await proxy.stop()
    await stopChild(service.child, 15_000)
    await upstream.close()
    await coinbase.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
