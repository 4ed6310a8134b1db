/**
 * The CoinGecko HTTP API as we use it: five GET endpoints, each body validated (responses.ts), every
 * misbehaviour a typed `SourceError`. Data calls are paid by the `Spend` they run under and guarded as in
 * upstreamCall.ts; each attempt takes its budget (credits/MonthlyBudget.ts), as each counts against the minute.
 *
 * Credits (CONTRACT C4 "Over a month", amended): CoinGecko bills a 200, one credit. An attempt gives its
 * credit back when not billed (another status, or no answer); one we stopped waiting for keeps it.
 *
 * The lists are paid from their own part of the month's credits, one attempt each, outside the breaker,
 * so their outage never refuses data calls (directory.ts holds them). The rank pages are one unit, paid
 * together before the first page; a load stopped part-way keeps its pages an hour, so the next try pays
 * only for the rest.
 */
import { Clock, Context, Duration, Effect, Layer, Redacted, Result } from "effect"
import { Headers, HttpClient, HttpClientRequest, Url } from "effect/http"
import { CircuitBreaker, RateLimiter } from "effect/persistence"
import { type SourceError, Spend } from "../upstream.ts"
import { billed, type Decoder, type Exchange, layerGuardStoresMemory, makeSourceCaller, newExchange, type RawResponse } from "../upstreamCall.ts"
import { CoinGeckoConfig } from "./CoinGeckoConfig.ts"
import { makeBudget, MonthlyBudget } from "./credits/MonthlyBudget.ts"
import {
  type ChartPoint,
  decodeCoinList,
  decodeMarketChart,
  decodeMarkets,
  decodeSupportedCurrencies,
  errorMessage,
  type ListedCoin,
  type MarketRow,
  ownRefusal
} from "./responses.ts"

export type { ChartPoint, MarketRow } from "./responses.ts"

export interface CoinGeckoClientShape {
  /** A list. `/simple/supported_vs_currencies`: lower-case codes. */
  readonly supportedCurrencies: Effect.Effect<ReadonlyArray<string>, SourceError>
  /** A list. `/coins/list`: every coin's id, ticker and name. */
  readonly coinList: Effect.Effect<ReadonlyArray<ListedCoin>, SourceError>
  /** A list. `/coins/markets` in usd by market cap, one page (from 1): the ranks. */
  readonly coinsByRank: (page: number, perPage: number) => Effect.Effect<ReadonlyArray<MarketRow>, SourceError>
  /** A list. Pages 1..`pages` of `coinsByRank` (fewer when one is short), paid as one unit (see the header). */
  readonly coinRanks: (pages: number, perPage: number) => Effect.Effect<ReadonlyArray<MarketRow>, SourceError>
  /** `/coins/markets` for coin ids, with 24h/7d/30d changes, paid as `Spend` says: one call per batch the URL length allows. */
  readonly marketsByIds: (vsCurrency: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<MarketRow>, SourceError>
  /** `/coins/{id}/market_chart/range`, daily, `fromSeconds`..`toSeconds` (UNIX s, both included), paid as `Spend` says; unknown id: NotFound. */
  readonly marketChartRange: (id: string, vsCurrency: string, fromSeconds: number, toSeconds: number) => Effect.Effect<ReadonlyArray<ChartPoint>, SourceError>
}

export class CoinGeckoClient extends Context.Service<CoinGeckoClient, CoinGeckoClientShape>()("app/CoinGeckoClient") {
  /** Needs a `RateLimiter` and a breaker store: backed by Redis, instances share budget and breaker. */
  static readonly layerNoDeps: Layer.Layer<
    CoinGeckoClient,
    never,
    HttpClient.HttpClient | CoinGeckoConfig | MonthlyBudget | RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore
  > = Layer.effect(CoinGeckoClient, Effect.suspend(() => makeCoinGeckoClient))

  /** One instance: budget and breaker in memory. */
  static readonly layer: Layer.Layer<CoinGeckoClient, never, HttpClient.HttpClient | CoinGeckoConfig | MonthlyBudget> = CoinGeckoClient.layerNoDeps
    .pipe(Layer.provide(layerGuardStoresMemory))
}

const CHANGE_WINDOWS = "24h,7d,30d"
/** CoinGecko's CDN refuses a URL past about 8,100 characters (414); ours, whole as sent, stay within this. */
const MAX_URL_CHARS = 8_000
/** The rows a /coins/markets call gives at most (its `per_page`), and so the ids it is asked for. */
const MARKETS_PER_CALL = 250
/** The pages of a rank load that stopped part-way are reused this long (ranks move slowly). */
const RANK_PAGES_KEPT_MS = 3_600_000
/** A refusal of history beyond the plan is logged at most this often. */
const BEYOND_PLAN_LOG_MS = 3_600_000

/** The length of a request's whole URL as it is sent (parameters encoded: a comma is %2C). */
const urlLength = (request: HttpClientRequest.HttpClientRequest) =>
  Result.match(Url.make(request.url, request.urlParams, undefined), { onSuccess: (url) => url.href.length, onFailure: () => Number.POSITIVE_INFINITY })

/** What an id adds to a URL's query, encoded as sent. */
const encodedLength = (id: string) => new URLSearchParams({ i: id }).toString().length - 2
const COMMA_ENCODED = encodedLength(",")

const makeCoinGeckoClient = Effect.gen(function*() {
  const config = yield* CoinGeckoConfig
  const http = yield* HttpClient.HttpClient
  const month = yield* MonthlyBudget
  const budget = makeBudget(config, yield* RateLimiter.RateLimiter, month)

  const reading = {
    source: "coingecko" as const,
    errorMessage,
    ownRefusal,
    keyed: true,
    rateLimitedSeconds: (raw: RawResponse) => {
      const header = raw.headers["retry-after"]
      if (header === undefined) return config.defaultRetryAfterSeconds
      const parsed = Headers.parseRetryAfter(header)
      if (Result.isFailure(parsed)) return config.defaultRetryAfterSeconds
      const seconds = Math.ceil(Duration.toSeconds(Headers.retryAfterDelay(parsed.success, raw.receivedAt)))
      return Math.min(Math.max(seconds, 1), 3_600)
    }
  }

  const caller = yield* makeSourceCaller({ http, reading, config, coolDownDetail: "upstream asked us to slow down (cooling down after 429)" })

  const keyHeader = config.apiPlan === "pro" ? "x-cg-pro-api-key" : "x-cg-demo-api-key"
  const requestFor = (path: string, params: Record<string, string>) => {
    const request = HttpClientRequest.get(`${config.baseUrl}${path}`).pipe(HttpClientRequest.setUrlParams(params), HttpClientRequest.acceptJson)
    return config.apiKey === undefined ? request : HttpClientRequest.setHeader(request, keyHeader, Redacted.value(config.apiKey))
  }

  // The plan's history refused (error 10012): said once an hour, as what it is, not as a refused key.
  let beyondPlanSaidAt = Number.NEGATIVE_INFINITY
  const noteBeyondPlan = (error: SourceError) =>
    error.reason._tag !== "BeyondPlan" ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (now - beyondPlanSaidAt < BEYOND_PLAN_LOG_MS) return Effect.void
      beyondPlanSaidAt = now
      return Effect.logWarning(
        "rates: CoinGecko was asked beyond the plan's history (error 10012); the series are asked at most 365 days back, so its clock or its window is not ours",
        error.detail
      )
    })

  /** Bodies of the lists are large (the coin list is over a MB): more time for their one attempt. */
  const listTimeoutMs = config.attemptTimeoutMs * 3
  const listCall = <A>(what: string, path: string, params: Record<string, string>, decode: Decoder<A>): Effect.Effect<A, SourceError> =>
    Effect.suspend(() =>
      caller.attempt(what, requestFor(path, params), caller.body(what, decode), listTimeoutMs, Effect.andThen(budget.listCall, budget.listCredits(1)))
    ).pipe(Effect.withSpan("coingecko.call", { attributes: { what } }))

  const rankParams = (page: number, perPage: number) => ({ vs_currency: "usd", order: "market_cap_desc", per_page: String(perPage), page: String(page) })

  // The pages of a rank load that stopped part-way, for the next try.
  let unfinished: { readonly perPage: number; readonly at: number; readonly pages: ReadonlyArray<ReadonlyArray<MarketRow>> } | undefined
  // Credits the lists' part can hold at once: a unit larger than that is paid in several.
  const unitMax = Math.max(1, Math.floor(month.plan.capacity.lists))

  const coinRanks = (pages: number, perPage: number): Effect.Effect<ReadonlyArray<MarketRow>, SourceError> =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const kept = unfinished !== undefined && unfinished.perPage === perPage && now - unfinished.at < RANK_PAGES_KEPT_MS ? unfinished : undefined
      const startedAt = kept?.at ?? now
      const loaded = [...(kept?.pages ?? [])]
      const complete = () => loaded.length >= pages || (loaded.length > 0 && loaded.at(-1)!.length < perPage)
      const unit = (count: number) => {
        const exchanges: Array<Exchange> = []
        const first = loaded.length + 1
        const calls = Effect.gen(function*() {
          for (let page = first; page < first + count && !complete(); page++) {
            const what = `coin ranks page ${page}`
            yield* caller.coolDown.check
            yield* budget.listCall
            const exchange = newExchange()
            exchanges.push(exchange)
            loaded.push(yield* caller.exchangeOnce(what, requestFor("/coins/markets", rankParams(page, perPage)), caller.body(what, decodeMarkets), listTimeoutMs, exchange))
          }
        })
        return Effect.acquireUseRelease(budget.listCredits(count), () => calls, (held) => held.giveBack(count - exchanges.filter(billed).length))
      }
      const load = Effect.gen(function*() {
        while (!complete()) yield* unit(Math.min(pages - loaded.length, unitMax))
      })
      // Stopped part-way: the pages loaded wait for the next try.
      yield* Effect.onError(load, () => Effect.sync(() => void (unfinished = loaded.length > 0 ? { perPage, at: startedAt, pages: loaded } : undefined)))
      unfinished = undefined
      return loaded.flat()
    }).pipe(Effect.withSpan("coingecko.call", { attributes: { what: "coin ranks" } }))

  const marketsParams = (vsCurrency: string, ids: ReadonlyArray<string>) => ({
    vs_currency: vsCurrency,
    ids: ids.join(","),
    per_page: String(Math.min(MARKETS_PER_CALL, Math.max(1, ids.length))),
    price_change_percentage: CHANGE_WINDOWS
  })

  /** `ids` in calls of at most MARKETS_PER_CALL, each URL (bare, then each id and comma, encoded) within MAX_URL_CHARS. */
  const marketsBatches = (vsCurrency: string, ids: ReadonlyArray<string>) => {
    const bare = urlLength(requestFor("/coins/markets", { ...marketsParams(vsCurrency, []), per_page: String(MARKETS_PER_CALL) }))
    const batches: Array<Array<string>> = []
    let batch: Array<string> = []
    let length = bare
    for (const id of ids) {
      const added = encodedLength(id)
      if (batch.length === MARKETS_PER_CALL || (batch.length > 0 && length + COMMA_ENCODED + added > MAX_URL_CHARS)) {
        batches.push(batch)
        batch = []
        length = bare
      }
      length += (batch.length === 0 ? 0 : COMMA_ENCODED) + added
      batch.push(id)
    }
    if (batch.length > 0) batches.push(batch)
    return batches
  }

  /** One logical data call, paid by the `Spend` it runs under; lazy, so a holder that does not need it pays nothing. */
  const dataCall = <A>(what: string, path: string, params: Record<string, string>, decode: Decoder<A>): Effect.Effect<A, SourceError> =>
    Effect.flatMap(Spend, ({ charge }) => caller.call(what, requestFor(path, params), caller.body(what, decode), charge, budget.spend)).pipe(
      Effect.tapError(noteBeyondPlan),
      Effect.withSpan("coingecko.call", { attributes: { what } })
    )

  return CoinGeckoClient.of({
    supportedCurrencies: listCall("supported currencies", "/simple/supported_vs_currencies", {}, decodeSupportedCurrencies),
    coinList: listCall("coin list", "/coins/list", {}, decodeCoinList),
    coinsByRank: (page, perPage) => listCall(`coin ranks page ${page}`, "/coins/markets", rankParams(page, perPage), decodeMarkets),
    coinRanks,
    marketsByIds: (vsCurrency, ids) =>
      Effect.map(
        Effect.forEach(marketsBatches(vsCurrency, ids), (batch) => dataCall("markets", "/coins/markets", marketsParams(vsCurrency, batch), decodeMarkets)),
        (rows) => rows.flat()
      ),
    marketChartRange: (id, vsCurrency, fromSeconds, toSeconds) =>
      dataCall(`market chart range of ${id}`, `/coins/${encodeURIComponent(id)}/market_chart/range`, {
        vs_currency: vsCurrency,
        from: String(fromSeconds),
        to: String(toSeconds),
        interval: "daily"
      }, decodeMarketChart).pipe(Effect.map((body) => body.prices))
  })
})
