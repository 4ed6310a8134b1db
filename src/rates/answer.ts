/**
 * Steps 5 and 6 of a `historical` call (CONTRACT C4): the body and until when it holds (pure), then the answer remembered.
 * A known coin served neither fresh nor from a last good copy fails the whole answer: a partial one would look complete.
 */
import { Context, Exit, Layer, Result, Schema } from "effect"
import { ExchangeRatesResponse } from "../api/schemas.ts"
import { strongEtag } from "../http/conditional.ts"
import { clockedLayer } from "../platform/clockedLayer.ts"
import { makeExpiringLru } from "./copies/CopyStore.ts"
import { changesFromSeries, changesToPrice, type DailyPoint } from "./dailySeries.ts"
import type { Chart, LiveQuote, PricesFound, Resolved, SecondOutcome, Served, Sourcing, WantedCoin } from "./ports.ts"
import { type RatesAnswer, type RatesQuery, type RatesResult, type RateSeries, RatesUnavailableError, RatesUpstreamError, type SourceName } from "./RatesProvider.ts"
import { isUnavailable, type SourceError, toRatesError } from "./upstream.ts"

/** The answer's `source`: the one every rate names, or `mixed`; the first source's when there is no rate. */
export const answerSource = (sources: ReadonlySet<SourceName>, first: SourceName): SourceName | "mixed" =>
  sources.size > 1 ? "mixed" : sources.values().next().value ?? first

/** A failure of the first source as the caller sees it: a coin it does not know is not a 404 of ours. */
export const verdictOf = (error: SourceError): RatesUpstreamError | RatesUnavailableError =>
  error.reason._tag === "NotFound" ? new RatesUpstreamError({ reason: error.message }) : toRatesError(error)

/** A coin neither source served, no copy held: the first source's verdict, 503 after the shorter wait (C4 "Second source", amended). */
const neitherSource = (first: SourceError, second: SourceError): RatesUpstreamError | RatesUnavailableError => {
  const reason = `${first.message}; ${second.message}`
  if (!isUnavailable(first)) return new RatesUpstreamError({ reason })
  const waits = [Math.max(1, first.retryAfterSeconds)]
  if (second.reason._tag !== "NotFound") waits.push(Math.max(1, second.retryAfterSeconds))
  return new RatesUnavailableError({ reason, retryAfterSeconds: Math.min(...waits) })
}

/** `2026-11-22T10:00:00Z`: ISO 8601 without the milliseconds (toISOString always ends `.mmmZ` in this range). */
const isoSeconds = (epochMs: number) => {
  const iso = new Date(epochMs).toISOString()
  return iso.length === 24 ? `${iso.slice(0, 19)}Z` : iso.replace(/\.\d{3}Z$/, "Z")
}

/** `points.slice(-count)` by hand: on a frozen array (held copies are) `slice` takes V8's slow path, ~40 times slower. */
const lastPoints = <A>(points: ReadonlyArray<A>, count: number): Array<A> => {
  const start = count > 0 ? Math.max(0, points.length - count) : Math.min(points.length, -count)
  const out: Array<A> = []
  for (let i = start; i < points.length; i++) out.push(points[i]!)
  return out
}

export const coinIds = (resolved: Resolved): Array<string> => {
  // At most 50 symbols: a linear scan beats a Set here.
  const ids: Array<string> = []
  for (const coin of resolved.coins.values()) if (coin !== null && !ids.includes(coin.id)) ids.push(coin.id)
  return ids
}

export const wantedCoins = (resolved: Resolved): Array<WantedCoin> => {
  const wanted: Array<WantedCoin> = []
  for (const [symbol, coin] of resolved.coins) if (coin !== null && !wanted.some((w) => w.id === coin.id)) wanted.push({ symbol, id: coin.id })
  return wanted
}

export type Charts = ReadonlyMap<string, Result.Result<Served<Chart>, SourceError>>

export interface Gathered {
  readonly query: RatesQuery
  /** When the call started (epoch ms): `asOf` of an answer without any price. */
  readonly startedAt: number
  readonly first: Sourcing
  readonly resolved: Resolved
  readonly live?: { readonly quotes: ReadonlyMap<string, Served<LiveQuote>>; readonly sourcing: Sourcing } | undefined
  /** The first source's latest prices of the coins without a live quote. */
  readonly latest: PricesFound
  readonly charts: Charts
  /** What the second source answered for the coins the first could not serve fresh (none when not asked). */
  readonly second?: { readonly outcomes: ReadonlyMap<string, SecondOutcome>; readonly sourcing: Sourcing } | undefined
}

/** Coins the first source could not serve fresh: chart failed (a 404 is an answer) or stale, or (no live quote) latest price stale or failed. */
export const notServedFresh = (resolved: Resolved, quoted: ReadonlyMap<string, unknown>, latest: PricesFound, charts: Charts): Array<WantedCoin> => {
  const wanted: Array<WantedCoin> = []
  for (const [symbol, coin] of resolved.coins) {
    if (coin === null || wanted.some((w) => w.id === coin.id)) continue
    const chart = charts.get(coin.id)
    if (chart === undefined) continue
    let failed: boolean
    if (Result.isFailure(chart)) failed = chart.failure.reason._tag !== "NotFound"
    else if (chart.success.value === null) failed = false
    else if (quoted.has(coin.id)) failed = chart.success.stale
    else {
      const market = latest.latest.get(coin.id)
      failed = chart.success.stale || (market === undefined ? latest.failure !== undefined : market.stale)
    }
    if (failed) wanted.push({ symbol, id: coin.id })
  }
  return wanted
}

const liveChanges = (quote: Served<LiveQuote>, series: ReadonlyArray<DailyPoint>) => ({
  "24h": quote.value.change24h,
  ...changesToPrice(series, quote.value.price, quote.storedAt)
})

export const assembleAnswer = (gathered: Gathered): Result.Result<RatesAnswer, RatesUpstreamError | RatesUnavailableError> => {
  const { charts, first, latest, live, query, resolved } = gathered
  const used = new Set<SourceName>()
  // The earliest `holdsUntil` of its parts (an old copy, or a failed call the next request would retry, makes it 0).
  let freshUntil = Number.POSITIVE_INFINITY
  let stale = false
  let asOf = Number.POSITIVE_INFINITY
  const rates: Array<RateSeries> = []
  const unknown: Array<string> = []
  const add = (rate: Omit<RateSeries, "source" | "sources" | "asOf">, price: SourceName, series: SourceName, observedAt: number) => {
    used.add(price).add(series)
    asOf = Math.min(asOf, observedAt)
    rates.push({ ...rate, source: price === series ? price : "mixed", sources: { price, series }, asOf: isoSeconds(observedAt) })
  }
  for (const symbol of query.symbols) {
    const coin = resolved.coins.get(symbol) ?? null
    const chart = coin === null ? undefined : charts.get(coin.id)
    if (coin === null || chart === undefined) {
      unknown.push(symbol)
      continue
    }
    const second = gathered.second?.outcomes.get(coin.id)
    const quote = live?.quotes.get(coin.id)
    if (second?._tag === "Served" && gathered.second !== undefined) {
      const { rate } = second
      const source = gathered.second.sourcing.source
      const series = lastPoints(rate.series, query.days)
      freshUntil = Math.min(freshUntil, rate.holdsUntil)
      if (quote === undefined || live === undefined) {
        add({ symbol, id: coin.id, name: rate.name, price: rate.price, change: rate.change, series }, source, source, rate.asOf)
        continue
      }
      // Its series from the second source, its price still the live quote's (fresher than the second's).
      freshUntil = Math.min(freshUntil, quote.holdsUntil)
      add({ symbol, id: coin.id, name: rate.name, price: quote.value.price, change: liveChanges(quote, rate.series), series }, live.sourcing.source, source, quote.storedAt)
      continue
    }
    // Strict: every known coin is served (fresh or last good), or the request fails.
    if (Result.isFailure(chart)) return Result.fail(second?._tag === "Failed" ? neitherSource(chart.failure, second.error) : verdictOf(chart.failure))
    const series = chart.success
    const market = quote === undefined ? latest.latest.get(coin.id) : undefined
    freshUntil = Math.min(freshUntil, series.holdsUntil, (quote ?? market)?.holdsUntil ?? 0)
    if (series.value === null) {
      unknown.push(symbol) // resolved, but the source has no such coin (404)
      continue
    }
    const lastClose = series.value.at(-1) // the last of the whole series is the last of its tail
    const points = lastPoints(series.value, query.days)
    stale ||= series.stale
    if (quote !== undefined && live !== undefined) {
      stale ||= quote.stale
      add({ symbol, id: coin.id, name: coin.name, price: quote.value.price, change: liveChanges(quote, series.value), series: points }, live.sourcing.source, first.source, quote.storedAt)
    } else if (market !== undefined && market.value !== null && market.value.price !== null) {
      const { change24h, change30d, change7d, name, price } = market.value
      stale ||= market.stale
      add({ symbol, id: coin.id, name: name || coin.name, price, change: { "24h": change24h, "7d": change7d, "30d": change30d }, series: points }, first.source, first.source, market.storedAt)
    } else if (lastClose !== undefined) {
      // No latest price: the last close, changes measured on the whole fetched range (30d needs more than days=7).
      stale ||= latest.failure !== undefined
      add({ symbol, id: coin.id, name: coin.name, price: lastClose[1], change: changesFromSeries(series.value), series: points }, first.source, first.source, lastClose[0])
    } else {
      unknown.push(symbol) // a coin without any price data
    }
  }
  // Without any rate, asOf is the clock's: the next answer differs, nothing in it is worth reusing.
  const priced = Number.isFinite(asOf)
  // Every source used, credited once, in the order sources are asked: first, live, second.
  const credits: Array<string> = []
  const credited = new Set<SourceName>()
  for (const sourcing of [first, live?.sourcing, gathered.second?.sourcing]) {
    if (sourcing === undefined || !used.has(sourcing.source) || credited.has(sourcing.source)) continue
    credited.add(sourcing.source)
    credits.push(sourcing.attribution)
  }
  return Result.succeed({
    result: {
      currency: query.currency.toUpperCase(),
      days: query.days,
      interval: "daily",
      asOf: isoSeconds(priced ? asOf : gathered.startedAt),
      source: answerSource(used, first.source),
      stale,
      rates,
      unknown,
      attribution: credits.length === 0 ? first.attribution : credits.join("; ")
    },
    freshUntil: priced ? freshUntil : 0
  })
}

/**
 * Step 6: the 200 body encoded once, kept per query while `freshUntil` holds, for the edge to repeat (handlers.ts `ratesReadyAnswer`).
 * Past freshness one repeat rebuilds it while the others get the old body (REBUILD_GRACE_MS): live answers end every second.
 */
export interface RatesAnswerMemoShape {
  /** Encodes the answer's body and keeps it for `query` while it holds; the answer with its body. */
  readonly remember: (query: RatesQuery, answer: RatesAnswer) => RatesAnswer
  /** The body held for `query` while fresh; undefined otherwise and for the one repeat let through to rebuild it. Synchronous. */
  readonly recall: (query: RatesQuery) => Uint8Array | undefined
  /** As `recall`, with the body's strong ETag, until when it holds and the time of the recall (the GET's caching headers). */
  readonly recallHeld: (query: RatesQuery) => HeldAnswer | undefined
  /** Entries and bytes held now (metrics, tests). */
  readonly size: () => { readonly entries: number; readonly bytes: number }
}

export interface RatesAnswerMemoOptions {
  readonly maxEntries?: number
  /** Most body bytes held in all (default 8 MiB); a larger body is not kept at all. */
  readonly maxBytes?: number
}

/** One key per normalised query (handlers.ts `toRatesQuery`): the currency, the days, the symbols in order. */
export const memoKey = (query: RatesQuery): string => `${query.currency}|${query.days}|${query.symbols.join(",")}`
const encodeResponse = Schema.encodeUnknownExit(ExchangeRatesResponse)
const utf8 = new TextEncoder()
/** The 200 body exactly as HttpApi would encode it; undefined when the result does not encode (left to HttpApi to report). */
export const encodeRatesBody = (result: RatesResult): Uint8Array | undefined => {
  const encoded = encodeResponse(result)
  return Exit.isFailure(encoded) ? undefined : utf8.encode(JSON.stringify(encoded.value))
}

/** How long past its freshness an answer is still sent while one request rebuilds it (from held copies: milliseconds). */
export const REBUILD_GRACE_MS = 250

interface HeldAnswer {
  readonly body: Uint8Array
  readonly etag: string
  /** Epoch ms; past `at` for a repeat sent while the answer is rebuilt (REBUILD_GRACE_MS). */
  readonly freshUntil: number
  /** When it was recalled (epoch ms, the memo's clock). */
  readonly at: number
}

interface HeldBody {
  readonly body: Uint8Array
  /** Made on the first recall that asks for it (the POST never does). */
  etag: string | undefined
  readonly freshUntil: number
  /** When a repeat was let through to rebuild it, once past `freshUntil`. */
  rebuildingSince: number | undefined
}

export const makeRatesAnswerMemo = (now: () => number, options: RatesAnswerMemoOptions = {}): RatesAnswerMemoShape => {
  // Entries outlive their freshness by the grace, for the repeats that arrive while one rebuilds them.
  const bodies = makeExpiringLru<HeldBody>(options.maxEntries ?? 512, options.maxBytes ?? 8 * 1024 * 1024)
  const keep = (query: RatesQuery, body: Uint8Array, freshUntil: number) => {
    const key = memoKey(query)
    // A newer answer replaces the held one, also one that is not kept (stale, or past already).
    bodies.remove(key)
    if (freshUntil > now()) {
      bodies.put(key, { value: { body, etag: undefined, freshUntil, rebuildingSince: undefined }, expiresAt: freshUntil + REBUILD_GRACE_MS, bytes: body.byteLength })
    }
  }
  const recallAt = (query: RatesQuery, at: number): HeldBody | undefined => {
    const held = bodies.get(memoKey(query), at)?.value
    if (held === undefined) return undefined
    if (held.freshUntil > at) return held
    if (held.rebuildingSince !== undefined && held.rebuildingSince <= at) return held
    held.rebuildingSince = at
    return undefined
  }
  const recall = (query: RatesQuery): Uint8Array | undefined => recallAt(query, now())?.body
  const recallHeld = (query: RatesQuery): HeldAnswer | undefined => {
    const at = now()
    const held = recallAt(query, at)
    if (held === undefined) return undefined
    held.etag ??= strongEtag(held.body)
    return { body: held.body, etag: held.etag, freshUntil: held.freshUntil, at }
  }
  return {
    remember: (query, answer) => {
      const body = answer.body ?? encodeRatesBody(answer.result)
      if (body === undefined) return answer
      keep(query, body, answer.freshUntil)
      return { ...answer, body }
    },
    recall,
    recallHeld,
    size: bodies.size
  }
}

export class RatesAnswerMemo extends Context.Service<RatesAnswerMemo, RatesAnswerMemoShape>()("app/RatesAnswerMemo") {
  /** A memo with these bounds, telling time by the Clock of the context it is built in (TestClock in tests). */
  static readonly layerWith = (options: RatesAnswerMemoOptions): Layer.Layer<RatesAnswerMemo> =>
    clockedLayer(RatesAnswerMemo, (now) => makeRatesAnswerMemo(now, options))

  /** 512 entries, 8 MiB of bodies. Provide it once per build: the use case and the edge share it. */
  static readonly layer: Layer.Layer<RatesAnswerMemo> = RatesAnswerMemo.layerWith({})
}
