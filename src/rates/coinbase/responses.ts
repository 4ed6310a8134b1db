/**
 * Coinbase Exchange's REST bodies we use and its error shape, read with Schema (prices must be positive).
 * No I/O here: CoinbaseClient.ts sends, upstreamCall.ts turns statuses into `SourceError`s with these.
 */
import { Exit, Schema, SchemaTransformation } from "effect"
import { clip, type Decoder } from "../upstreamCall.ts"

/** A decimal string as Coinbase writes prices ("64250.12"), read into a finite number. */
const Decimal = Schema.String.check(Schema.isPattern(/^-?\d+(\.\d+)?$/)).pipe(
  Schema.decodeTo(Schema.Finite, SchemaTransformation.numberFromString)
)
const Price = Decimal.check(Schema.isGreaterThan(0))
/** One row of `GET /products`. Only what we read; extra members are ignored. */
const ProductRow = Schema.Struct({
  id: Schema.NonEmptyString,
  base_currency: Schema.NonEmptyString,
  quote_currency: Schema.NonEmptyString,
  status: Schema.String,
  trading_disabled: Schema.optional(Schema.Boolean)
})
/** A pair Coinbase trades now, upper-case: `{ id: "BTC-USD", base: "BTC", quote: "USD" }`. */
export interface CoinbaseProduct {
  readonly id: string
  readonly base: string
  readonly quote: string
}
const Positive = Schema.Finite.check(Schema.isGreaterThan(0))
/** `[time (s), low, high, open, close, volume]`: prices positive, as a ticker's; volume zero or more. */
const Candle = Schema.Tuple([Schema.Finite, Positive, Positive, Positive, Positive, Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))])
export type Candle = typeof Candle.Type
/** An ISO 8601 instant ("2026-11-22T09:59:58.123456Z"), read into epoch ms. */
const Instant = Schema.String.check(
  Schema.isPattern(/^\d{4}-\d\d-\d\dT/),
  Schema.makeFilter((s: string) => Number.isFinite(Date.parse(s)) || "a date and time")
)
const TickerBody = Schema.Struct({ price: Price, time: Instant })
/** The last trade's price, and when it traded (epoch ms). */
export interface Ticker {
  readonly price: number
  readonly time: number
}

const StatsBody = Schema.Struct({ open: Price, last: Price })
/** `open`: the price 24 hours ago; `last`: the last trade's. */
export interface Stats {
  readonly open: number
  readonly last: number
}

const decodeProductRows = Schema.decodeUnknownExit(Schema.Array(ProductRow))
export const decodeProducts: Decoder<ReadonlyArray<CoinbaseProduct>> = (json) =>
  Exit.map(decodeProductRows(json), (rows) =>
    rows.filter((row) => row.status === "online" && row.trading_disabled !== true).map((row) => ({
      id: row.id,
      base: row.base_currency.toUpperCase(),
      quote: row.quote_currency.toUpperCase()
    })))
export const decodeCandles: Decoder<ReadonlyArray<Candle>> = Schema.decodeUnknownExit(Schema.Array(Candle))
const decodeTickerBody = Schema.decodeUnknownExit(TickerBody)
export const decodeTicker: Decoder<Ticker> = (json) => Exit.map(decodeTickerBody(json), (body) => ({ price: body.price, time: Date.parse(body.time) }))
export const decodeStats: Decoder<Stats> = Schema.decodeUnknownExit(StatsBody)
const decodeErrorBody = Schema.decodeUnknownExit(Schema.Struct({ message: Schema.String }))
/** Coinbase's `message`, or the JSON as text. */
export const errorMessage = (json: unknown): string => {
  const parsed = decodeErrorBody(json)
  return Exit.isSuccess(parsed) ? parsed.value.message : clip(JSON.stringify(json))
}
