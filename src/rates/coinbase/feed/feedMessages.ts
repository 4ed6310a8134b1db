/**
 * Coinbase's WebSocket feed (`ticker`, `heartbeat`) read with Schema (a message that does not read is dropped, never
 * half used), and what we send it. The ticker sent on subscribing lacks its trade (docs/upstreams.md §4): a
 * snapshot of unknown age, skipped. No I/O: see connection.ts.
 */
import { Exit, Schema, SchemaIssue, SchemaTransformation } from "effect"

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

const schemas = { ticker: Ticker, heartbeat: Heartbeat, subscriptions: Subscriptions, error: Refusal } as const
type Known = keyof typeof schemas
export type FeedMessage = (typeof schemas)[Known]["Type"]

const decoders = {
  ticker: Schema.decodeUnknownExit(Ticker),
  heartbeat: Schema.decodeUnknownExit(Heartbeat),
  subscriptions: Schema.decodeUnknownExit(Subscriptions),
  error: Schema.decodeUnknownExit(Refusal)
}
const issuesOf = SchemaIssue.makeFormatterStandardSchemaV1()
/** A message of ours that did not read: its type and the first field that did not (`ticker.price`). */
export interface Unreadable {
  readonly _tag: "Unreadable"
  readonly kind: string
  readonly detail: string
}
/** One text frame: a message we use, `ignored` (other type, not JSON, ticker without trade) or `Unreadable`. */
export const readFeedMessage = (frame: string): FeedMessage | "ignored" | Unreadable => {
  let parsed: unknown
  try {
    parsed = JSON.parse(frame)
  } catch {
    return "ignored"
  }
  const type = typeof parsed === "object" && parsed !== null ? (parsed as { type?: unknown }).type : undefined
  if (typeof type !== "string" || !Object.hasOwn(schemas, type)) return "ignored"
  if (type === "ticker") {
    const { time, trade_id } = parsed as { time?: unknown; trade_id?: unknown }
    if (time === undefined && trade_id === undefined) return "ignored"
  }
  const read: Exit.Exit<FeedMessage, Schema.SchemaError> = decoders[type as Known](parsed)
  if (Exit.isSuccess(read)) return read.value
  const failure = Exit.findErrorOption(read)
  const first = failure._tag === "Some" ? issuesOf(failure.value.issue).issues[0] : undefined
  const field = first?.path?.map((key) => (typeof key === "object" ? String(key.key) : String(key))).join(".")
  return { _tag: "Unreadable", kind: field === undefined || field === "" ? type : `${type}.${field}`, detail: first?.message ?? "unreadable" }
}
/** The channels we ask for: trades (price, 24 h open) and a beat a second that says a pair is alive. */
const CHANNELS = ["ticker", "heartbeat"]
/** Every pair in one message: Coinbase counts messages a second per address, not pairs. */
export const subscribeMessage = (productIds: ReadonlyArray<string>): string =>
  JSON.stringify({ type: "subscribe", product_ids: productIds, channels: CHANNELS })
