/**
 * The rates use case (CONTRACT C4): one `historical` call as its steps, each a port (ports.ts) entered once for all coins,
 * within `requestBudgetMs` (past it the work lands in the copies); the caller pays (C4 "Under abuse"). Wiring: layer.ts.
 */
import { Clock, Effect, Layer } from "effect"
import { assembleAnswer, coinIds, notServedFresh, RatesAnswerMemo, verdictOf, wantedCoins } from "./answer.ts"
import { RatesDemand } from "./coingecko/latestPrices.ts"
import { CoinDirectory, DailyPoints, LatestPrices, type LiveQuote, LiveQuotes, type PricesFound, type Served, SecondSource, type WantedCoin } from "./ports.ts"
import { type HeldPrice, type HeldPrices, type HeldPricesQuery, type RatesAnswer, type RatesError, RatesProvider, type RatesQuery } from "./RatesProvider.ts"
import { Charge, spendingUntil } from "./upstream.ts"

export interface HistoricalRatesOptions {
  /** The most a request waits, retries included (CONTRACT C4 answers within 10 s whatever the sources do). */
  readonly requestBudgetMs: number
  /** How long last-good copies are served when the sources fail (COINGECKO_STALE_TTL_H), in seconds. */
  readonly lastGoodSeconds?: number | undefined
}

const makeHistoricalRates = (options: HistoricalRatesOptions) =>
  Effect.gen(function*() {
    const directory = yield* CoinDirectory
    const live = yield* LiveQuotes
    const prices = yield* LatestPrices
    const points = yield* DailyPoints
    const second = yield* SecondSource
    const answers = yield* RatesAnswerMemo
    const demand = yield* RatesDemand
    const budget = options.requestBudgetMs
    const noPrices: PricesFound = { latest: new Map(), failure: undefined }
    const noQuotes: ReadonlyMap<string, Served<LiveQuote>> = new Map()
    /** Step 2: live quotes first; the first source's credits only for the coins they do not cover. */
    const latestPrices = (coins: ReadonlyArray<WantedCoin>, currency: string) =>
      Effect.gen(function*() {
        const quotes = live.sourcing === undefined ? noQuotes : yield* live.quotes(coins, currency)
        const rest = coins.filter((coin) => !quotes.has(coin.id)).map((coin) => coin.id)
        const latest = rest.length === 0 ? noPrices : yield* prices.latest(rest, currency)
        return { quotes, latest }
      })
    const historical = (query: RatesQuery): Effect.Effect<RatesAnswer, RatesError> =>
      Effect.gen(function*() {
        // Every request the edge does not repeat counts its caller here (RatesDemand in coingecko/latestPrices.ts; the edge's repeats: handlers.ts ratesReadyAnswer).
        demand.note(query.caller, query.currency.toLowerCase())
        const startedAt = yield* Clock.currentTimeMillis
        const deadline = startedAt + budget
        // The cold fetches of this request are charged to its caller; its failures count once in a breaker.
        const charge = Charge.request(query.caller)
        const until = (stepDeadline: number) => spendingUntil(stepDeadline, charge)
        const currency = query.currency.toLowerCase()
        // 1. Lists held in memory: only right after start-up may a request wait for their load (a third of its budget).
        const { ids, resolved } = yield* Effect.gen(function*() {
          yield* directory.checkCurrency(currency)
          const resolved = yield* directory.resolve(query.symbols)
          return { ids: coinIds(resolved), resolved }
        }).pipe(until(Math.min(deadline, startedAt + budget / 3)))
        // 2 and 3. With a second source, the first has two thirds of the budget: the rest is the second's.
        const [{ latest, quotes }, charts] = yield* Effect.all([
          latestPrices(wantedCoins(resolved), currency),
          points.series(ids, currency)
        ], { concurrency: 2 }).pipe(until(second.sourcing === undefined ? deadline : startedAt + (budget * 2) / 3))
        // 4. Only for what the first source could not serve fresh: when it serves, the second is never asked.
        const wanted = second.sourcing === undefined ? [] : notServedFresh(resolved, quotes, latest, charts)
        const fallback = wanted.length === 0 ? undefined : yield* second.ratesFor(wanted, currency).pipe(until(deadline))
        // 5. The C4 body.
        const answer = yield* Effect.fromResult(assembleAnswer({
          query: { ...query, currency },
          startedAt,
          first: prices,
          resolved,
          live: live.sourcing === undefined ? undefined : { quotes, sourcing: live.sourcing },
          latest,
          charts,
          second: fallback === undefined || second.sourcing === undefined ? undefined : { outcomes: fallback, sourcing: second.sourcing }
        }))
        // 6. Remembered while every value behind it holds.
        return answers.remember(query, answer)
      }).pipe(
        Effect.catchTag("SourceError", (error) => Effect.fail(verdictOf(error))),
        // No stack trace: capturing one costs an Error per request, and the span's name says where it is.
        Effect.withSpan("rates.historical", { attributes: { symbols: query.symbols.length, days: query.days } }, { captureStackTrace: false })
      )
    /** Steps 1 and 2 alone, for the price stream (C10): what is held now, within the request budget. */
    const latestPricesHeld = (query: HeldPricesQuery): Effect.Effect<HeldPrices, RatesError> =>
      Effect.gen(function*() {
        const currency = query.currency.toLowerCase()
        if (query.caller !== undefined) demand.note(query.caller, currency)
        const startedAt = yield* Clock.currentTimeMillis
        const until = (deadline: number) => spendingUntil(deadline, Charge.request(query.caller))
        const resolved = yield* Effect.flatMap(directory.checkCurrency(currency), () => directory.resolve(query.symbols)).pipe(until(startedAt + budget / 3))
        const { latest, quotes } = yield* latestPrices(wantedCoins(resolved), currency).pipe(until(startedAt + budget))
        const held = new Map<string, HeldPrice>()
        const unknown: Array<string> = []
        for (const [symbol, coin] of resolved.coins) {
          if (coin === null) {
            unknown.push(symbol)
            continue
          }
          const quote = quotes.get(coin.id)
          if (quote !== undefined) {
            held.set(symbol, { price: quote.value.price, change24h: quote.value.change24h, at: quote.storedAt, source: live.sourcing?.source ?? "coinbase" })
            continue
          }
          const found = latest.latest.get(coin.id)
          const value = found?.value
          if (found === undefined || value === null || value === undefined || value.price === null) continue
          held.set(symbol, { price: value.price, change24h: value.change24h, at: found.storedAt, source: prices.source })
        }
        return { prices: held, unknown }
      }).pipe(Effect.catchTag("SourceError", (error) => Effect.fail(verdictOf(error))))
    return RatesProvider.of({ historical, lastGoodSeconds: options.lastGoodSeconds, latestPrices: latestPricesHeld })
  })

/** The use case over whatever serves its ports (layer.ts: the sources; tests: fakes). */
export const layer = (options: HistoricalRatesOptions): Layer.Layer<
  RatesProvider,
  never,
  CoinDirectory | LiveQuotes | LatestPrices | DailyPoints | SecondSource | RatesAnswerMemo | RatesDemand
> => Layer.effect(RatesProvider, makeHistoricalRates(options))
