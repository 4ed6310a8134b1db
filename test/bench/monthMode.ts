/**
 * `npm run bench -- --month` (issue 21): a month of a landing page's traffic through the service and the
 * CoinGecko emulator on a simulated clock, per plan, to count the credits CoinGecko would bill.
 *
 * The simulation is test/support/simulatedMonth.ts: a step every `--step-s` (20) simulated seconds, over
 * `--days` days (30) from 2026-11-01T00:00Z, as shipped: the majors live from the Coinbase emulator's feed,
 * a long-tail coin (PEPE) asked by a few addresses besides the landing page (`--no-feed`: CoinGecko alone,
 * the landing page only, as before live quotes). Printed per plan (Demo 10,000, Basic 100,000): credits
 * spent (the emulator's answers 200, what CoinGecko bills; the ledger's count beside it, which must be the
 * same), and per day at most, the refresh interval reached, the oldest prices served (now − asOf), the
 * oldest majors' and long-tail prices (each rate's asOf), the share of answers that were 200.
 *
 * `--with-stream` (issue 41): each plan's month twice, without and then with one live price stream of
 * `STREAM_CRYPTOS` (the majors and the long-tail coin) held all month from one address (monthStream.ts), its
 * credits beside the month without; and what the stream received (price events per symbol and source,
 * whether it was still open at the end).
 *
 *   npm run bench -- --month [--step-s 20] [--days 30] [--plans 10000,100000] [--no-feed] [--with-stream]
 */
import { ADDRESSES, LANDING_PAGE, LONG_TAIL, LONG_TAIL_ADDRESSES, MONTH_START, type MonthResult, simulateMonth } from "../support/simulatedMonth.ts"
import { fail, fmtInt, round } from "./common.ts"

export interface MonthOptions {
  readonly stepSeconds: number
  readonly days: number
  readonly plans: ReadonlyArray<number>
  readonly feed: boolean
  readonly withStream: boolean
}

/** The stream held all month with `--with-stream`: the landing page's majors and the long-tail coin. */
const STREAM_CRYPTOS = ["BTC", "ETH", "SOL", "PEPE"]

export const parseMonthOptions = (argv: ReadonlyArray<string>): MonthOptions => {
  const value = (name: string) => {
    const i = argv.indexOf(`--${name}`)
    return i === -1 ? undefined : argv[i + 1]
  }
  const int = (name: string, fallback: number, min: number, max: number) => {
    const raw = value(name)
    if (raw === undefined) return fallback
    const n = Number(raw)
    if (!Number.isInteger(n) || n < min || n > max) fail(`--${name} must be an integer in ${min}..${max} (got ${raw})`)
    return n
  }
  const plans = (value("plans") ?? "10000,100000").split(",").map(Number)
  if (plans.some((n) => !Number.isInteger(n) || n < 1_000)) fail("--plans: a comma list of credits a month, each at least 1000")
  return { stepSeconds: int("step-s", 20, 1, 3_600), days: int("days", 30, 1, 31), plans, feed: !argv.includes("--no-feed"), withStream: argv.includes("--with-stream") }
}

export const runMonthMode = async (argv: ReadonlyArray<string>) => {
  const opts = parseMonthOptions(argv)
  process.stdout.write(
    `month mode: the landing page's ${LANDING_PAGE.length} queries every ${opts.stepSeconds} s of simulated time from ` +
      `${ADDRESSES} addresses, ${opts.days} days from ${new Date(MONTH_START).toISOString()}, against the CoinGecko emulator` +
      (opts.feed ? `; live quotes from the Coinbase emulator's feed; ${JSON.stringify(LONG_TAIL)} from ${LONG_TAIL_ADDRESSES} addresses\n` : " alone (--no-feed)\n")
  )
  const results: Array<MonthResult> = []
  for (const perMonth of opts.plans) {
    for (const stream of opts.withStream ? [undefined, STREAM_CRYPTOS] : [undefined]) {
      process.stdout.write(`plan of ${fmtInt(perMonth)} credits a month${stream === undefined ? "" : `, a stream of ${stream.join(",")} open all month`}...`)
      const result = await simulateMonth(perMonth, { stepSeconds: opts.stepSeconds, days: opts.days, feed: opts.feed, stream })
      results.push(result)
      process.stdout.write(` ${result.wallSeconds} s\n`)
    }
  }
  const live = (r: MonthResult) =>
    r.majorsOldestSeconds === undefined
      ? "| – | – "
      : `| ${r.majorsOldestSeconds} s (${fmtInt(r.majorsFromCoinbase?.coinbase ?? 0)} of ${fmtInt(r.majorsFromCoinbase?.all ?? 0)} from Coinbase) | ${round((r.longTailOldestSeconds ?? 0) / 60, 2)} min `
  const streamCell = (r: MonthResult) => (r.stream === undefined ? "none " : `${STREAM_CRYPTOS.join(",")} `)
  process.stdout.write(
    `\n| credits a month ${opts.withStream ? "| stream " : ""}| credits spent (ledger's count) | most in a day | refresh interval (last, max) | oldest prices served | oldest majors' price | oldest long-tail price | answers 200 |\n${opts.withStream ? "|---" : ""}|---|---|---|---|---|---|---|---|\n`
  )
  for (const r of results) {
    const interval = `${round((r.refreshIntervalSeconds.last ?? 0) / 60, 2)} min, ${round(r.refreshIntervalSeconds.max / 60, 2)} min`
    process.stdout.write(
      `| ${fmtInt(r.perMonth)} ${opts.withStream ? `| ${streamCell(r)}` : ""}| ${fmtInt(r.credits)} (${round((100 * r.credits) / r.perMonth, 1)} %; ${r.ledgerCredits === undefined ? "–" : fmtInt(r.ledgerCredits)}) | ${fmtInt(r.maxCreditsInADay)} | ${interval} | ` +
        `${round(r.oldestPricesSeconds / 60, 2)} min ${live(r)}| ${fmtInt(r.ok)} of ${fmtInt(r.requests)} (${round((100 * r.ok) / r.requests, 3)} %) |\n`
    )
  }
  for (const r of results) {
    if (r.ledgerCredits !== undefined && r.ledgerCredits !== r.credits) process.stdout.write(`plan ${fmtInt(r.perMonth)}: the ledger counted ${fmtInt(r.ledgerCredits)} credits where CoinGecko billed ${fmtInt(r.credits)}\n`)
  }
  for (const r of results) {
    if (r.stream === undefined) continue
    const s = r.stream
    const last = Object.entries(s.lastAt).map(([symbol, at]) => `${symbol} ${new Date(at).toISOString()}`).join(", ")
    process.stdout.write(
      `plan ${fmtInt(r.perMonth)}, the stream: ${s.open ? "still open at the end" : "CLOSED before the end"}; ${fmtInt(s.events)} price events ${JSON.stringify(s.bySymbol)}, ` +
        `by source ${JSON.stringify(s.bySource)}; ${s.snapshots} snapshot(s), ${fmtInt(s.heartbeats)} heartbeats; last at: ${last}\n`
    )
  }
  const others = results.flatMap((r) => Object.entries(r.statuses).filter(([s]) => s !== "200").map(([s, n]) => `${fmtInt(r.perMonth)}: ${n} × ${s}`))
  if (others.length > 0) process.stdout.write(`answers other than 200: ${others.join("; ")}\n`)
  return results
}
