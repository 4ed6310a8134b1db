/**
 * `npm run bench -- --month-real [--minutes 10] [--calls-per-month N]` (issue 21): the landing page's
 * traffic on a real clock, against the service as `npm start` runs it (its ledger and history under a
 * temp DATA_DIR) and the CoinGecko emulator: about 10 requests a second, the three queries in turn, from
 * 200 addresses (X-Forwarded-For, TRUST_PROXY=true). After a warm-up (each query answered once and a
 * minute of traffic), the credits spent over `--minutes` are compared with the month's pace.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { planFor } from "../../src/rates/coingecko/credits/monthlyCredits.ts"
import { fail, fmtInt, round, sleep } from "./common.ts"
import { LANDING_PAGE } from "../support/simulatedMonth.ts"
import { stopChild } from "./processes.ts"
import { startService } from "./servers.ts"
import { startUpstream } from "./upstream.ts"

const ADDRESSES = 200
const PER_SECOND = 10
const WARM_UP_MS = 60_000

export const runMonthRealMode = async (argv: ReadonlyArray<string>) => {
  const value = (name: string) => {
    const i = argv.indexOf(`--${name}`)
    return i === -1 ? undefined : argv[i + 1]
  }
  const minutes = Number(value("minutes") ?? "10")
  const perMonth = Number(value("calls-per-month") ?? "10000")
  if (!(minutes > 0 && minutes <= 120)) fail("--minutes: 1..120")
  if (!Number.isInteger(perMonth) || perMonth < 1_000) fail("--calls-per-month: an integer of at least 1000")
  const upstream = await startUpstream(undefined)
  const dataDir = mkdtempSync(join(tmpdir(), "bench-month-real-"))
  const service = await startService({
    serverCpus: undefined,
    dataDir,
    upstreamUrl: upstream.url,
    logPath: "/dev/null",
    profDir: undefined,
    env: { TRUST_PROXY: "true", COINGECKO_CALLS_PER_MONTH: String(perMonth) }
  })
  const url = `http://127.0.0.1:${service.port}/api/v1/exchange-rates`
  const bodies = LANDING_PAGE.map((query) => JSON.stringify(query))
  const statuses: Record<string, number> = {}
  let sent = 0
  let oldestMs = 0
  const ask = async (i: number) => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": `198.51.100.${i % ADDRESSES}` },
      body: bodies[i % bodies.length]!
    })
    const text = await response.text()
    statuses[response.status] = (statuses[response.status] ?? 0) + 1
    if (response.status === 200) oldestMs = Math.max(oldestMs, Date.now() - Date.parse((JSON.parse(text) as { asOf: string }).asOf))
  }
  const drive = async (ms: number) => {
    const until = Date.now() + ms
    const pending: Array<Promise<void>> = []
    while (Date.now() < until) {
      pending.push(ask(sent++))
      await sleep(1000 / PER_SECOND)
    }
    await Promise.all(pending)
  }
  try {
    process.stdout.write(`month-real mode: ${PER_SECOND} requests a second, the landing page's ${bodies.length} queries from ${ADDRESSES} addresses, plan ${fmtInt(perMonth)} credits a month\n`)
    for (let i = 0; i < bodies.length; i++) await ask(i)
    await drive(WARM_UP_MS)
    const before = await upstream.totalCalls()
    for (const key of Object.keys(statuses)) delete statuses[key]
    oldestMs = 0
    const sentBefore = sent
    process.stdout.write(`warm-up done (${before} upstream calls); measuring ${minutes} minutes...\n`)
    await drive(minutes * 60_000)
    const credits = (await upstream.totalCalls()) - before
    const pace = planFor(perMonth).ratePerMs * 60_000
    const rate = credits / minutes
    process.stdout.write(
      `requests ${fmtInt(sent - sentBefore)}: ${JSON.stringify(statuses)}; credits ${credits} in ${minutes} min = ${round(rate, 3)} a minute ` +
        `(the month's pace: ${round(pace, 4)} a minute; ${fmtInt(perMonth)} / 43,200 = ${round(perMonth / 43_200, 4)}); ` +
        `oldest prices served ${round(oldestMs / 60_000, 2)} min\n` +
        `within the month's pace with every answer 200: ${rate <= perMonth / 43_200 && Object.keys(statuses).every((s) => s === "200") ? "met" : "NOT met"}\n`
    )
  } finally {
    await stopChild(service.child, 15_000)
    await upstream.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
