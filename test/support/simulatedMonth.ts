/**
 * A month (or a few days) of a landing page's traffic through the service and the CoinGecko emulator on
 * a simulated clock: the service (src/server.ts `ServerLive`, the live rates provider, its credit ledger
 * and history under a temp DATA_DIR) runs in this process with Effect's Clock replaced by one the loop
 * sets. Every step the clock and the emulator's clock move on and the landing page's three queries are
 * asked over real HTTP by one visitor, as a browser loading the page asks them, each step's visitor the
 * next of 200 addresses (X-Forwarded-For, TRUST_PROXY=true; the refresh budget is shared by callers:
 * src/rates/coingecko/latestPrices.ts RatesDemand). Waits
 * (timeouts, retries) still take real time. Credits are the emulator's count of the calls it answered 200
 * (one credit each, what CoinGecko bills), set beside the ledger's own count (the month's `spent`, what
 * `upstream_credits_spent_month` shows). Used by `npm run bench -- --month`, test/integration/e2e/rates-month.test.ts
 * and test/integration/e2e/rates-currency-flood.test.ts (hours rather than days, and more queries each step: `extra`).
 *
 * With `feed`, as shipped (issue 28): the Coinbase emulator too, its REST API and its WebSocket feed on the
 * same simulated clock, the service following the majors live. Each step the feed publishes a trade and a
 * heartbeat of every pair followed, and the step's queries wait until the service has read them (a
 * real feed ticks every second; a step is 20 simulated seconds). A long-tail coin (`LONG_TAIL`, which
 * only CoinGecko prices) is asked too, by a few addresses, and the ages of the majors' and of its prices
 * are measured on each rate's own `asOf`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Clock, Context, Duration, Effect, Exit, Layer, References, Scope } from "effect"
import { HttpServer } from "effect/http"
import { metricsText } from "../../src/observability/metrics.ts"
import { DurableCell, type DurableCellShape } from "../../src/platform/durableCell/DurableCell.ts"
import * as DurableCells from "../../src/platform/durableCell/layer.ts"
import { LEDGER } from "../../src/rates/coingecko/credits/MonthlyBudget.ts"
import { DailyHistory } from "../../src/rates/history/DailyHistory.ts"
import { ServerLive } from "../../src/server.ts"
import * as Rates from "../../src/rates/layer.ts"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../emulators/coinbase.ts"
import { startCoinGeckoEmulator } from "../emulators/coingecko.ts"
import { testServices } from "./app.ts"
import { holdStream, type StreamSeen } from "./monthStream.ts"
import type { Env } from "./config.ts"

/** The landing page of issue 21: three queries, asked over and over. */
export const LANDING_PAGE = [
  { cryptos: ["BTC", "ETH", "SOL"], days: 7 },
  { cryptos: ["BTC"], days: 30 },
  { cryptos: ["BTC", "ETH"], currency: "eur", days: 7 }
] as const

/** A coin only CoinGecko prices (Coinbase lists no PEPE), asked each step by one of `LONG_TAIL_ADDRESSES`. */
export const LONG_TAIL = { cryptos: ["PEPE"], days: 7 } as const
export const LONG_TAIL_ADDRESSES = 5
/** Coins whose prices the feed carries in the landing page. */
const MAJORS = new Set(["BTC", "ETH", "SOL"])

export const MONTH_START = Date.parse("2026-11-01T00:00:00Z")
const NEXT_MONTH = Date.UTC(new Date(MONTH_START).getUTCFullYear(), new Date(MONTH_START).getUTCMonth() + 1, 1)
const DAY_MS = 86_400_000
const HOUR_MS = 3_600_000
export const ADDRESSES = 200

/** Effect's Clock, told the time by this loop; waits are real. */
const simulatedClock = (start: number) => {
  let now = start
  // Waits of an hour or more (a list's daily reload) also end when the simulated clock passes their end; shorter ones
  // (timeouts, retries, the feed's silence) take real time, as the service's I/O does between two 20-second steps.
  const sleepers = new Set<{ readonly until: number; readonly wake: () => void }>()
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => now,
    currentTimeMillis: Effect.sync(() => now),
    currentTimeNanosUnsafe: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => process.hrtime.bigint(),
    monotonicTimeNanos: Effect.sync(() => process.hrtime.bigint()),
    sleep: (duration) =>
      Effect.callback<void>((resume) => {
        const ms = Duration.toMillis(duration)
        const sleeper = { until: now + ms, wake: () => (clearTimeout(handle), sleepers.delete(sleeper), resume(Effect.void)) }
        const handle = setTimeout(sleeper.wake, Math.max(0, ms))
        if (ms >= HOUR_MS) sleepers.add(sleeper)
        return Effect.sync(() => (clearTimeout(handle), sleepers.delete(sleeper)))
      })
  }
  const set = (epochMs: number) => {
    now = epochMs
    for (const sleeper of sleepers) if (sleeper.until <= now) sleeper.wake()
  }
  return { clock, set }
}

/** The credit ledger as the service has it (files under DATA_DIR), counting the operations under way. */
const countingCell = () => {
  let pending = 0
  let started = 0
  let built: DurableCellShape | undefined
  const counted = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.suspend(() => {
      pending++
      started++
      return Effect.ensuring(effect, Effect.sync(() => void pending--))
    })
  const layer = Layer.effect(
    DurableCell,
    Effect.map(Effect.service(DurableCell), (cell) => {
      built = cell
      return {
        ...cell,
        get: (name: string) => counted(cell.get(name)),
        compareAndSet: (name: string, expected: string | undefined, next: string) => counted(cell.compareAndSet(name, expected, next))
      }
    })
  ).pipe(Layer.provide(DurableCells.layerLocal))
  /** The month's count in the ledger as stored. */
  const spent = async () => {
    const text = built === undefined ? undefined : await Effect.runPromise(built.get(LEDGER))
    return text === undefined ? 0 : (JSON.parse(text) as { spent: number }).spent
  }
  return { layer, pending: () => pending, started: () => started, spent }
}

const gauge = (name: string): number | undefined => {
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, "m").exec(metricsText())
  return match === null ? undefined : Number(match[1])
}

export interface MonthResult {
  readonly perMonth: number
  readonly requests: number
  readonly ok: number
  readonly statuses: Record<string, number>
  /** The emulator's answers 200: the credits CoinGecko bills. */
  readonly credits: number
  /**
   * The ledger's count of them (the month's `spent`): `credits` when it spends what CoinGecko bills.
   * Undefined when the run went past November (the ledger counts a calendar month).
   */
  readonly ledgerCredits: number | undefined
  /** Every call the emulator received, refused ones too (the minute's limit counts them). */
  readonly calls: number
  readonly maxCreditsInADay: number
  readonly refreshIntervalSeconds: { readonly last: number | undefined; readonly max: number }
  readonly oldestPricesSeconds: number
  readonly wallSeconds: number
  /** With `feed`: the oldest BTC, ETH or SOL price served (now − the rate's asOf), and the long-tail coin's. */
  readonly majorsOldestSeconds: number | undefined
  readonly longTailOldestSeconds: number | undefined
  /** With `feed`: steps whose trades the service had not all read after a second (a connection replaced). */
  readonly stepsUnread: number | undefined
  /** With `stream`: what the stream held all month received, and whether it was still open at the end. */
  readonly stream: StreamSeen | undefined
  /** With `feed`: answers whose majors were priced by Coinbase, of those with majors. */
  readonly majorsFromCoinbase: { readonly coinbase: number; readonly all: number } | undefined
  /** The emulator's `/coins/markets` calls: their currency and simulated time. */
  readonly markets: ReadonlyArray<{ readonly currency: string; readonly at: number }>
}

/** One step of the simulation, as `extra` sees it. */
export interface SimulatedStep {
  /** The simulated time (epoch ms) and the step's number from 0. */
  readonly now: number
  readonly step: number
  /** Asks the rates endpoint `body` (JSON-encoded here) from `address`: the status and body answered. */
  readonly ask: (body: unknown, address: string) => Promise<{ readonly status: number; readonly body: string }>
}

export interface SimulationOptions {
  readonly stepSeconds: number
  /** How long, in simulated days; `hours` instead when given. */
  readonly days: number
  readonly hours?: number | undefined
  /** Over the simulation's environment (a TTL, a plan's setting). */
  readonly env?: Env | undefined
  /**
   * More queries each step, asked alongside the landing page's and settled with them; their answers
   * are the hook's, not counted in the result's requests.
   */
  readonly extra?: ((step: SimulatedStep) => Promise<void>) | undefined
  /** The shipped configuration: live quotes from the Coinbase emulator's feed, and the long-tail coin asked. */
  readonly feed?: boolean | undefined
  /**
   * A live price stream of these symbols held all month from one address (monthStream.ts), opened before the
   * first step: its hub's rounds run on real time (250 ms) while the simulated clock moves 20 s a step.
   */
  readonly stream?: ReadonlyArray<string> | undefined
}

interface Rate {
  readonly symbol: string
  readonly asOf: string
  readonly sources: { readonly price: string }
}

/**
 * The Coinbase emulator on the simulation's clock: its feed publishes only when told (each step). No trade
 * is dropped: one trade stands for a whole step here (a minute), where the real feed's dropped message
 * costs a second before the next trade.
 */
const startCoinbase = () =>
  startCoinbaseEmulator({ host: "127.0.0.1", now: MONTH_START, rateLimit: false, feed: { tickEveryMs: 3_600_000, heartbeatEveryMs: 3_600_000, dropEvery: 0 } })

export const simulateMonth = async (perMonth: number, opts: SimulationOptions): Promise<MonthResult> => {
  const emulator = await startCoinGeckoEmulator({ host: "127.0.0.1", now: MONTH_START })
  const coinbase: CoinbaseEmulator | undefined = opts.feed === true ? await startCoinbase() : undefined
  const dataDir = mkdtempSync(join(tmpdir(), "bench-month-"))
  const sim = simulatedClock(MONTH_START)
  const ledger = countingCell()
  const activity = () => `${ledger.started()}:${emulator.stats().total}`
  const env = {
    COINGECKO_BASE_URL: emulator.url,
    COINGECKO_CALLS_PER_MONTH: String(perMonth),
    DATA_DIR: dataDir,
    TRUST_PROXY: "true",
    RATE_LIMIT_RATES_PER_MIN: "1000000000",
    PUBLIC_BASE_URL: "http://127.0.0.1",
    ...(coinbase === undefined ? {} : { COINBASE_BASE_URL: coinbase.url, COINBASE_WS_URL: coinbase.wsUrl, RATES_FALLBACK: "none" }),
    ...opts.env
  }
  // CoinGecko never fails here: the second source is never asked, and must not reach its real host. The ledger
  // and the history under DATA_DIR, as the service keeps them.
  const rates = Rates.layerTest({ env, cell: ledger.layer, history: DailyHistory.layer })
  const services = { ...testServices(env), rates }
  const server = ServerLive({ services, port: 0, host: "127.0.0.1", quiet: true }).pipe(
    Layer.provide(Layer.succeed(Clock.Clock)(sim.clock)),
    Layer.provide(process.env.MONTH_DEBUG ? Layer.succeed(References.MinimumLogLevel)("Debug") : Layer.empty)
  )
  const scope = await Effect.runPromise(Scope.make())
  const started = performance.now()
  let closeStream: (() => void) | undefined
  try {
    const context = await Effect.runPromise(Layer.buildWithScope(server, scope))
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag === "UnixPathAddress") throw new Error("the service listens on a unix socket")
    const url = `http://127.0.0.1:${address.port}/api/v1/exchange-rates`
    const bodies = LANDING_PAGE.map((query) => JSON.stringify(query))
    const ask = async (body: unknown, address: string) => {
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": address },
        body: typeof body === "string" ? body : JSON.stringify(body)
      })
      return { status: response.status, body: await response.text() }
    }
    const stream = opts.stream === undefined ? undefined : await holdStream(`http://127.0.0.1:${address.port}`, opts.stream, "192.0.2.41")
    closeStream = stream?.close
    if (stream !== undefined && stream.seen().status !== 200) throw new Error(`the month's stream was refused: ${stream.seen().status}`)
    const statuses: Record<string, number> = {}
    let requests = 0
    let ok = 0
    let oldest = 0
    let maxInterval = 0
    let maxCreditsInADay = 0
    let creditsAtDayStart = 0
    let day = 0
    let majorsOldest = 0
    let longTailOldest = 0
    const majorsFrom = { coinbase: 0, all: 0 }
    const ticksRead = () => gauge("rates_live_ticks_total") ?? 0
    let unread = 0
    const end = MONTH_START + (opts.hours === undefined ? opts.days * DAY_MS : opts.hours * HOUR_MS)
    for (let now = MONTH_START, step = 0; now < end; now += opts.stepSeconds * 1000, step++) {
      sim.set(now)
      emulator.setNow(now)
      if (coinbase !== undefined) {
        coinbase.setNow(now)
        const [read, sent] = [ticksRead(), coinbase.stats().feed.ticks]
        coinbase.publishFeed()
        // The step's trades read by the service before anyone asks (at most a second of real time; a
        // connection being replaced may not read them all).
        const published = coinbase.stats().feed.ticks - sent
        let waited = 0
        for (; ticksRead() - read < published && waited < 1_000; waited++) await new Promise((resolve) => setTimeout(resolve, 1))
        if (waited >= 1_000) unread++
      }
      const [answers, , longTail] = await Promise.all([
        Promise.all(bodies.map((body) => ask(body, `198.51.100.${step % ADDRESSES}`))),
        opts.extra?.({ now, step, ask }),
        coinbase === undefined ? undefined : ask(LONG_TAIL, `203.0.113.${step % LONG_TAIL_ADDRESSES}`)
      ])
      if (longTail !== undefined) {
        requests++
        statuses[longTail.status] = (statuses[longTail.status] ?? 0) + 1
        if (longTail.status === 200) {
          ok++
          for (const rate of (JSON.parse(longTail.body) as { rates: ReadonlyArray<Rate> }).rates) longTailOldest = Math.max(longTailOldest, now - Date.parse(rate.asOf))
        }
      }
      // Work the answers started (background refreshes) ends before the clock moves on, as it would
      // within a real step's seconds: the simulation must not outrun the service's own I/O. Every
      // upstream call goes through the ledger first, so quiet ledger and emulator mean no work under way.
      for (let checks = 0, quiet = 0, seen = activity(); quiet < 2 && checks < 2_000; checks++) {
        await new Promise((resolve) => setImmediate(resolve))
        const now = activity()
        if (now === seen && ledger.pending() === 0 && emulator.stats().inFlight === 0) quiet++
        else if (now !== seen || quiet === 0) {
          quiet = 0
          seen = now
          await new Promise((resolve) => setTimeout(resolve, 1))
        }
      }
      for (const answer of answers) {
        requests++
        statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
        if (answer.status !== 200) continue
        ok++
        const parsed = JSON.parse(answer.body) as { asOf: string; rates: ReadonlyArray<Rate> }
        const asOf = Date.parse(parsed.asOf)
        oldest = Math.max(oldest, now - asOf)
        const majors = parsed.rates.filter((rate) => MAJORS.has(rate.symbol))
        if (coinbase !== undefined && majors.length > 0) {
          majorsFrom.all++
          if (majors.every((rate) => rate.sources.price === "coinbase")) majorsFrom.coinbase++
          for (const rate of majors) majorsOldest = Math.max(majorsOldest, now - Date.parse(rate.asOf))
        }
        if (process.env.MONTH_DEBUG && now - asOf > Number(process.env.MONTH_DEBUG) * 60_000) process.stdout.write(`${new Date(now).toISOString()} ${answer.body.slice(0, 160)} calls=${emulator.stats().total}\n`)
      }
      if (step % 180 === 0) maxInterval = Math.max(maxInterval, gauge("rates_refresh_interval_seconds") ?? 0)
      const today = Math.floor((now - MONTH_START) / DAY_MS)
      if (today !== day) {
        const credits = emulator.stats().credits
        maxCreditsInADay = Math.max(maxCreditsInADay, credits - creditsAtDayStart)
        creditsAtDayStart = credits
        day = today
      }
    }
    const streamSeen = stream?.seen()
    stream?.close()
    const credits = emulator.stats().credits
    maxCreditsInADay = Math.max(maxCreditsInADay, credits - creditsAtDayStart)
    return {
      perMonth,
      requests,
      ok,
      statuses,
      credits,
      ledgerCredits: end <= NEXT_MONTH ? await ledger.spent() : undefined,
      calls: emulator.stats().total,
      maxCreditsInADay,
      refreshIntervalSeconds: { last: gauge("rates_refresh_interval_seconds"), max: maxInterval },
      oldestPricesSeconds: Math.round(oldest / 1000),
      wallSeconds: Math.round((performance.now() - started) / 100) / 10,
      majorsOldestSeconds: coinbase === undefined ? undefined : Math.round(majorsOldest / 1000),
      longTailOldestSeconds: coinbase === undefined ? undefined : Math.round(longTailOldest / 1000),
      majorsFromCoinbase: coinbase === undefined ? undefined : majorsFrom,
      stepsUnread: coinbase === undefined ? undefined : unread,
      stream: streamSeen,
      markets: emulator.stats().markets
    }
  } finally {
    closeStream?.()
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await emulator.close()
    await coinbase?.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

