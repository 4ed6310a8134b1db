/**
 * What the Coinbase Exchange emulator (./coinbase.ts) answers, faults and limits aside: the public market data
 * our second source uses (products, candles, ticker, stats), from the deterministic data of ./coinbase-data.ts.
 *
 * Runs on Node's type stripping: erasable TypeScript only, local imports with `.ts`.
 */
import { coinbaseCandle, coinbaseProductRow, coinbaseQuote, coinbaseTime, emulatedProductById, emulatedProducts, priceText } from "./coinbase-data.ts"

const GRANULARITIES = new Set([60, 300, 900, 3_600, 21_600, 86_400])
const MAX_CANDLES = 300

interface Answer {
  readonly status: number
  readonly body: unknown
}

const message = (status: number, text: string): Answer => ({ status, body: { message: text } })
const NOT_FOUND = message(404, "NotFound")

/** ISO 8601 or epoch seconds → epoch ms; NaN when neither. */
const instantOf = (text: string): number => (/^\d+(\.\d+)?$/.test(text) ? Number(text) * 1000 : Date.parse(text))

const candles = (id: string, query: URLSearchParams, now: number): Answer => {
  const granularity = Number(query.get("granularity") ?? Number.NaN)
  if (!GRANULARITIES.has(granularity)) return message(400, "Unsupported granularity")
  const stepMs = granularity * 1000
  const startText = query.get("start")
  const endText = query.get("end")
  // Documented: unless both are given, both are ignored and the range ends now.
  let start: number
  let end: number
  if (startText === null || endText === null) {
    end = now
    start = Math.floor(now / stepMs) * stepMs - (MAX_CANDLES - 1) * stepMs
  } else {
    start = instantOf(startText)
    end = instantOf(endText)
    if (!Number.isFinite(start)) return message(400, "Invalid start")
    if (!Number.isFinite(end)) return message(400, "Invalid end")
    if (start > end) return message(400, "start must be before end")
  }
  const first = Math.floor(start / stepMs) * stepMs
  if (Math.floor((end - first) / stepMs) + 1 > MAX_CANDLES) {
    return message(400, "granularity too small for the requested time range. Count of aggregations requested exceeds 300")
  }
  const rows = []
  for (let t = Math.floor(Math.min(end, now) / stepMs) * stepMs; t >= first; t -= stepMs) {
    const candle = coinbaseCandle(id, t, granularity, now)
    if (candle !== undefined) rows.push(candle)
  }
  return { status: 200, body: rows }
}

/** The API itself, faults and limits aside. */
export const answer = (path: string, query: URLSearchParams, now: number, listed: ReadonlySet<string> | undefined): Answer => {
  if (path === "/products") return { status: 200, body: emulatedProducts.filter((p) => listed?.has(p.id) ?? true).map((p) => coinbaseProductRow(p.id)) }
  const match = /^\/products\/([^/]+)\/(candles|ticker|stats)$/.exec(path)
  if (match === null) return NOT_FOUND
  const id = decodeURIComponent(match[1]!).toUpperCase()
  if (!emulatedProductById.has(id)) return NOT_FOUND
  if (match[2] === "candles") return candles(id, query, now)
  // The feed's ticker messages say the same at the same instant (coinbase-feed-ticks.ts).
  const quote = coinbaseQuote(id, now)
  if (match[2] === "ticker") {
    return {
      status: 200,
      body: {
        ask: priceText(quote.ask),
        bid: priceText(quote.bid),
        volume: "12345.67890000",
        trade_id: Math.floor(now / 1000) % 1_000_000_000,
        price: priceText(quote.price),
        size: "0.01000000",
        time: coinbaseTime(now)
      }
    }
  }
  return {
    status: 200,
    body: {
      open: priceText(quote.open),
      high: priceText(quote.high),
      low: priceText(quote.low),
      last: priceText(quote.price),
      volume: "23456.78900000",
      volume_30day: "701234.56700000"
    }
  }
}
