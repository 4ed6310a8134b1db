/**
 * `npm run bench -- --month-real [--minutes 10] [--calls-per-month N]` (issues 21 and 28): the landing
 * page's traffic on a real clock, against the service as `npm start` runs it (its ledger and history under
 * a temp DATA_DIR), the CoinGecko emulator and the Coinbase emulator with its feed (live quotes, REST
 * tickers): about 10 requests a second, the three queries in turn, from 200 addresses (X-Forwarded-For,
 * TRUST_PROXY=true). After a warm-up (each query answered once and a minute of traffic), the credits spent
 * over `--minutes` are compared with the month's pace, and the BTC, ETH and SOL prices' ages (each rate's
 * asOf) and sources are reported.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { planFor } from "../../src/rates/coingecko/credits/monthlyCredits.ts"
import { fail, fmtInt, round, sleep } from "./common.ts"
import { startCoinbaseEmulator } from "../emulators/coinbase.ts"
import { LANDING_PAGE } from "../support/simulatedMonth.ts"
import { stopChild } from "./processes.ts"
import { startService } from "./servers.ts"
import { startUpstream } from "./upstream.ts"

const ADDRESSES = 200
const PER_SECOND = 10
const WARM_UP_MS = 60_000
/** The coins the Coinbase feed prices on the landing page. */
const LIVE_SYMBOLS = new Set(["BTC", "ETH", "SOL"])

interface Answer {
  readonly asOf: string
  readonly rates: ReadonlyArray<{ readonly symbol: string; readonly asOf: string; readonly sources: { readonly price: string } }>
}

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
  // On the real clock, its public rate limit on: the service's calls as Coinbase would take them.
  const coinbase = await startCoinbaseEmulator({ host: "127.0.0.1" })
  const dataDir = mkdtempSync(join(tmpdir(), "bench-month-real-"))
  const service = await startService({
    serverCpus: undefined,
    dataDir,
    upstreamUrl: upstream.url,
    logPath: "/dev/null",
    profDir: undefined,
    // Coinbase as shipped (second source and live quotes), at the emulator.
    env: { TRUST_PROXY: "true", COINGECKO_CALLS_PER_MONTH: String(perMonth), RATES_FALLBACK: "coinbase", COINBASE_BASE_URL: coinbase.url, COINBASE_WS_URL: coinbase.wsUrl }
  })
  const url = `http://127.0.0.1:${service.port}/api/v1/exchange-rates`
  const bodies = LANDING_PAGE.map((query) => JSON.stringify(query))
  const statuses: Record<string, number> = {}
  let sent = 0
  let oldestMs = 0
  /** BTC, ETH and SOL: the oldest price served (now less its rate's asOf), and the answers having all of them from Coinbase. */
  const live = { oldestMs: 0, answers: 0, fromCoinbase: 0 }
  const ask = async (i: number) => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": `198.51.100.${i % ADDRESSES}` },
      body: bodies[i % bodies.length]!
    })
    const text = await response.text()
    statuses[response.status] = (statuses[response.status] ?? 0) + 1
    if (response.status !== 200) return
    const at = Date.now()
    const answer = JSON.parse(text) as Answer
    oldestMs = Math.max(oldestMs, at - Date.parse(answer.asOf))
    const rates = answer.rates.filter((rate) => LIVE_SYMBOLS.has(rate.symbol))
    live.answers++
    if (rates.every((rate) => rate.sources.price === "coinbase")) live.fromCoinbase++
    for (const rate of rates) live.oldestMs = Math.max(live.oldestMs, at - Date.parse(rate.asOf))
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
    Object.assign(live, { oldestMs: 0, answers: 0, fromCoinbase: 0 })
    const coinbaseBefore = coinbase.stats()
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
        `BTC, ETH and SOL: oldest price served ${round(live.oldestMs / 1000, 1)} s (asOf in whole seconds); ` +
        `all from Coinbase in ${fmtInt(live.fromCoinbase)} of ${fmtInt(live.answers)} answers; ` +
        `Coinbase REST calls ${coinbase.stats().total - coinbaseBefore.total}, feed ticks sent ${fmtInt(coinbase.stats().feed.ticks - coinbaseBefore.feed.ticks)}\n` +
        `within the month's pace with every answer 200: ${rate <= perMonth / 43_200 && Object.keys(statuses).every((s) => s === "200") ? "met" : "NOT met"}\n`
    )
  } finally {
    await stopChild(service.child, 15_000)
    await upstream.close()
    await coinbase.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
