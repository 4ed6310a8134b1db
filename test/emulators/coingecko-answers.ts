/**
 * What the CoinGecko emulator (./coingecko.ts) answers, faults aside: the API v3 subset our rates
 * capability uses, from the deterministic data of ./coingecko-data.ts.
 *
 * Runs on Node's type stripping: erasable TypeScript only, local imports with `.ts`.
 */
import {
  DAY_MS,
  emulatedChange,
  emulatedCoinById,
  emulatedCoins,
  type EmulatedCoin,
  emulatedCurrencies,
  emulatedDailyPrices,
  emulatedPrice,
  topRankedBySymbol
} from "./coingecko-data.ts"

const csv = (value: string | null): Array<string> =>
  value === null ? [] : value.split(",").map((part) => part.trim().toLowerCase()).filter((part) => part.length > 0)

export interface Answer {
  readonly status: number
  readonly body: unknown
}

const marketRow = (c: EmulatedCoin, currency: string, now: number, windows: ReadonlyArray<string>) => {
  const price = emulatedPrice(c.id, currency, now)
  const row: Record<string, unknown> = {
    id: c.id,
    symbol: c.symbol,
    name: c.name,
    image: `https://assets.example.invalid/coins/${c.id}.png`,
    current_price: price,
    market_cap: Math.round(price * 1_000_000_000 / (c.rank ?? 5_000)),
    market_cap_rank: c.rank,
    total_volume: Math.round(price * 10_000_000 / (c.rank ?? 5_000)),
    price_change_percentage_24h: emulatedChange(c.id, currency, now, 24),
    last_updated: new Date(now).toISOString()
  }
  const hoursOf: Record<string, number> = { "1h": 1, "24h": 24, "7d": 168, "14d": 336, "30d": 720, "200d": 4_800, "1y": 8_760 }
  for (const window of windows) {
    const hours = hoursOf[window]
    if (hours !== undefined) row[`price_change_percentage_${window}_in_currency`] = emulatedChange(c.id, currency, now, hours)
  }
  return row
}

const byRank = (a: EmulatedCoin, b: EmulatedCoin) => (a.rank ?? Number.POSITIVE_INFINITY) - (b.rank ?? Number.POSITIVE_INFINITY)

/** The form of a /coins/markets call, for `byQuery`. */
export const marketsForm = (query: URLSearchParams) =>
  query.get("ids") !== null ? "markets:ids" : query.get("symbols") !== null ? "markets:symbols" : "markets:ranks"

/** `/coins/list`: every coin, then `extra` dead ones (`flood-coin-N`, ticker `fcN`). */
const coinList = (extra: number) => {
  const list: Array<{ id: string; symbol: string; name: string }> = emulatedCoins.map(({ id, name, symbol }) => ({ id, symbol, name }))
  for (let i = 0; i < extra; i++) list.push({ id: `flood-coin-${i}`, symbol: `fc${i}`, name: `Flood Coin ${i}` })
  return list
}

/**
 * The Demo plan's refusal of history older than 365 days: 401 with error 10012, on market_chart and
 * market_chart/range alike (docs/upstreams.md §1; ghostfolio#3231, waxtax#8).
 */
const beyondDemoRange = (now: number): Answer => ({
  status: 401,
  body: {
    error: {
      status: {
        timestamp: new Date(now).toISOString(),
        error_code: 10012,
        error_message: "Your request exceeds the allowed time range. Public API users are limited to querying historical data within the past 365 days. " +
          "Upgrade to a paid plan to enjoy full historical data access: https://www.coingecko.com/en/api/pricing. "
      }
    }
  }
})

const HOUR_MS = 3_600_000

/**
 * Whether a point is a daily close not yet published at `now`: the point at 00:00 UTC of day D appears
 * only at D + `publishDelayMs` (coingecko.ts `publishDelayMinutes`), as when CoinGecko publishes it late.
 */
const unpublished = (t: number, now: number, publishDelayMs: number) => t % DAY_MS === 0 && now < t + publishDelayMs

/**
 * `/coins/{id}/market_chart/range?vs_currency&from&to[&interval=daily]` (from and to in UNIX seconds):
 * daily points at 00:00 UTC (the same prices as market_chart's) when `interval=daily` or the range
 * spans more than 90 days, else hourly points; none after "now", and a last "now" point when the range
 * reaches it, like the real API. Closes not yet published (`unpublished`) are left out.
 */
const rangeAnswer = (id: string, query: URLSearchParams, now: number, publishDelayMs: number): Answer => {
  const c = emulatedCoinById.get(id)
  if (c === undefined || c.chartMissing === true) return { status: 404, body: { error: "coin not found" } }
  const currency = query.get("vs_currency")?.toLowerCase()
  if (currency === undefined || !emulatedCurrencies.has(currency)) return { status: 400, body: { error: "invalid vs_currency" } }
  const from = Number(query.get("from") ?? Number.NaN) * 1000
  const to = Number(query.get("to") ?? Number.NaN) * 1000
  if (!Number.isFinite(from) || !Number.isFinite(to) || from > to) return { status: 400, body: { error: "invalid from or to" } }
  if (from < now - 365 * DAY_MS) return beyondDemoRange(now)
  const daily = query.get("interval") === "daily" || to - from > 90 * DAY_MS
  const step = daily ? DAY_MS : HOUR_MS
  const prices: Array<[number, number]> = []
  for (let t = Math.ceil(from / step) * step; t <= Math.min(to, now); t += step) {
    if (!unpublished(t, now, publishDelayMs)) prices.push([t, emulatedPrice(c.id, currency, t)])
  }
  if (to >= now && prices.at(-1)?.[0] !== now) prices.push([now, emulatedPrice(c.id, currency, now)])
  return {
    status: 200,
    body: {
      prices,
      market_caps: prices.map(([t, p]) => [t, Math.round(p * 1_000_000_000 / (c.rank ?? 5_000))]),
      total_volumes: prices.map(([t, p]) => [t, Math.round(p * 10_000_000 / (c.rank ?? 5_000))])
    }
  }
}

/** The API itself, faults aside; daily closes appear `publishDelayMs` after their 00:00 UTC. */
export const answer = (path: string, query: URLSearchParams, now: number, extraCoins: number, publishDelayMs = 0): Answer => {
  if (path === "/ping") return { status: 200, body: { gecko_says: "(V3) To the Moon!" } }
  if (path === "/simple/supported_vs_currencies") return { status: 200, body: [...emulatedCurrencies.keys()] }
  if (path === "/coins/list") return { status: 200, body: coinList(extraCoins) }

  if (path === "/coins/markets") {
    const currency = query.get("vs_currency")?.toLowerCase()
    if (currency === undefined || currency === "") return { status: 400, body: { error: "Missing parameter vs_currency" } }
    if (!emulatedCurrencies.has(currency)) return { status: 400, body: { error: "invalid vs_currency" } }
    const windows = csv(query.get("price_change_percentage"))
    const ids = csv(query.get("ids"))
    const symbols = csv(query.get("symbols"))
    let coins: Array<EmulatedCoin>
    if (ids.length > 0) {
      coins = emulatedCoins.filter((c) => ids.includes(c.id))
    } else if (symbols.length > 0) {
      coins = query.get("include_tokens") === "all"
        ? emulatedCoins.filter((c) => symbols.includes(c.symbol))
        : symbols.flatMap((s) => topRankedBySymbol(s) ?? [])
    } else {
      coins = [...emulatedCoins]
    }
    const perPage = Math.min(250, Math.max(1, Number(query.get("per_page") ?? 100) || 100))
    const page = Math.max(1, Number(query.get("page") ?? 1) || 1)
    const rows = [...new Set(coins)].sort(byRank).slice((page - 1) * perPage, page * perPage)
    return { status: 200, body: rows.map((c) => marketRow(c, currency, now, windows)) }
  }

  const range = /^\/coins\/([^/]+)\/market_chart\/range$/.exec(path)
  if (range !== null) return rangeAnswer(decodeURIComponent(range[1]!), query, now, publishDelayMs)

  const chart = /^\/coins\/([^/]+)\/market_chart$/.exec(path)
  if (chart !== null) {
    const c = emulatedCoinById.get(decodeURIComponent(chart[1]!))
    if (c === undefined || c.chartMissing === true) return { status: 404, body: { error: "coin not found" } }
    const currency = query.get("vs_currency")?.toLowerCase()
    if (currency === undefined || !emulatedCurrencies.has(currency)) return { status: 400, body: { error: "invalid vs_currency" } }
    const days = Number(query.get("days"))
    if (!Number.isInteger(days) || days < 1) return { status: 400, body: { error: "invalid days" } }
    if (days > 365) return beyondDemoRange(now)
    // The closes, less those not yet published; the last point is "now", the current price, not a close.
    const prices = emulatedDailyPrices(c.id, currency, days, now).filter(([t], i, all) => i === all.length - 1 || !unpublished(t, now, publishDelayMs))
    return {
      status: 200,
      body: {
        prices,
        market_caps: prices.map(([t, p]) => [t, Math.round(p * 1_000_000_000 / (c.rank ?? 5_000))]),
        total_volumes: prices.map(([t, p]) => [t, Math.round(p * 10_000_000 / (c.rank ?? 5_000))])
      }
    }
  }
  return { status: 404, body: { error: "Not Found" } }
}

