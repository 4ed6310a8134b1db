/**
 * What Coinbase Exchange's public WebSocket feed says, read (the `ticker` and `heartbeat` channels), and
 * what we send it. Every message is validated with Schema: a message that does not read is dropped, never
 * half used. No I/O here: connection.ts sends and reads.
 */
import { Exit, Schema, SchemaTransformation } from "effect"

/** A positive decimal string as Coinbase writes prices ("64250.12"), read into a number. */
const Price = Schema.String.check(Schema.isPattern(/^\d+(\.\d+)?$/)).pipe(
  Schema.decodeTo(Schema.Finite, SchemaTransformation.numberFromString)
).check(Schema.isGreaterThan(0))

/** An ISO 8601 instant with up to microseconds, read into epoch ms. */
const Instant = Schema.String.check(
  Schema.isPattern(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/),
  Schema.makeFilter((s: string) => Number.isFinite(Date.parse(s)) || "a date and time")
).pipe(Schema.decodeTo(Schema.Finite, SchemaTransformation.transform({ decode: Date.parse, encode: (ms) => new Date(ms).toISOString() })))

const TradeId = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

const Ticker = Schema.Struct({
  type: Schema.Literal("ticker"),
  product_id: Schema.NonEmptyString,
  price: Price,
  open_24h: Price,
  time: Instant,
  trade_id: TradeId
})

const Heartbeat = Schema.Struct({
  type: Schema.Literal("heartbeat"),
  product_id: Schema.NonEmptyString,
  last_trade_id: TradeId,
  time: Instant
})

const Subscriptions = Schema.Struct({
  type: Schema.Literal("subscriptions"),
  channels: Schema.Array(Schema.Struct({ name: Schema.String, product_ids: Schema.Array(Schema.String) }))
})

const Refusal = Schema.Struct({
  type: Schema.Literal("error"),
  message: Schema.String,
  reason: Schema.optional(Schema.String)
})

const FeedMessage = Schema.Union([Ticker, Heartbeat, Subscriptions, Refusal])
export type FeedMessage = typeof FeedMessage.Type

const decodeMessage = Schema.decodeUnknownExit(Schema.fromJsonString(FeedMessage))

/** Types we do not subscribe to, or do not use: skipped without a word. */
const KNOWN = /"type"\s*:\s*"(ticker|heartbeat|subscriptions|error)"/

/** One text frame read: a message we use, `ignored` (another type), or `unreadable` (ours, but invalid). */
export const readFeedMessage = (frame: string): FeedMessage | "ignored" | "unreadable" => {
  if (!KNOWN.test(frame)) return "ignored"
  const read = decodeMessage(frame)
  return Exit.isSuccess(read) ? read.value : "unreadable"
}

/** The channels we ask for: trades (price, 24 h open) and a beat a second that says a pair is alive. */
const CHANNELS = ["ticker", "heartbeat"]

export const subscribeMessage = (productIds: ReadonlyArray<string>): string =>
  JSON.stringify({ type: "subscribe", product_ids: productIds, channels: CHANNELS })
