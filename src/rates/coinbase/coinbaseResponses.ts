/**
 * What Coinbase Exchange's public market data answers, read: the bodies we use (validated with Schema;
 * its prices are decimal strings, read into finite numbers) and every misbehaviour turned into a typed
 * `CoinbaseError` (never a defect). No I/O here: CoinbaseClient.ts sends, this reads.
 */
import { Cause, Data, Effect, Exit, Option, Schema, SchemaTransformation } from "effect"
import { type UpstreamFailureKind } from "../upstreamFailure.ts"

export { toRatesError } from "../upstreamFailure.ts"

// ---------------------------------------------------------------------------------------------------
// Errors

export type CoinbaseFailureKind = UpstreamFailureKind

export class CoinbaseError extends Data.TaggedError("CoinbaseError")<{
  readonly kind: CoinbaseFailureKind
  readonly detail: string
  /** Whole seconds to wait before asking again; meaningful for rate-limited, circuit-open, unavailable. */
  readonly retryAfterSeconds: number
}> {
  override get message() {
    return `Coinbase ${this.kind}: ${this.detail}`
  }
}

export const failWith = (kind: CoinbaseFailureKind, detail: string, retryAfterSeconds = 0) =>
  Effect.fail(new CoinbaseError({ kind, detail, retryAfterSeconds }))

// ---------------------------------------------------------------------------------------------------
// Bodies

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

/** A pair Coinbase trades now, e.g. `{ id: "BTC-USD", base: "BTC", quote: "USD" }`. */
export interface CoinbaseProduct {
  readonly id: string
  /** Upper-case ticker of the coin. */
  readonly base: string
  /** Upper-case code of the currency it is quoted in. */
  readonly quote: string
}

/** `[time (s), low, high, open, close, volume]`, numbers. */
const Candle = Schema.Tuple([Schema.Finite, Schema.Finite, Schema.Finite, Schema.Finite, Schema.Finite, Schema.Finite])
export type Candle = typeof Candle.Type

/** An ISO 8601 instant ("2026-11-22T09:59:58.123456Z"), read into epoch ms. */
const Instant = Schema.String.check(
  Schema.isPattern(/^\d{4}-\d\d-\d\dT/),
  Schema.makeFilter((s: string) => Number.isFinite(Date.parse(s)) || "a date and time")
)
const TickerBody = Schema.Struct({ price: Price, time: Instant })
export interface Ticker {
  /** The last trade's price. */
  readonly price: number
  /** When it traded, epoch ms. */
  readonly time: number
}

const StatsBody = Schema.Struct({ open: Price, last: Price })
export interface Stats {
  /** The price 24 hours ago. */
  readonly open: number
  /** The last trade's price. */
  readonly last: number
}

/** Coinbase's error body. */
const ErrorBody = Schema.Struct({ message: Schema.String })

export type Decoder<A> = (json: unknown) => Exit.Exit<A, Schema.SchemaError>

const decodeProductRows = Schema.decodeUnknownExit(Schema.Array(ProductRow))
/** The products listed as tradable now: `status` online and trading not disabled. */
export const decodeProducts: Decoder<ReadonlyArray<CoinbaseProduct>> = (json) =>
  Exit.map(decodeProductRows(json), (rows) =>
    rows.filter((row) => row.status === "online" && row.trading_disabled !== true).map((row) => ({
      id: row.id,
      base: row.base_currency.toUpperCase(),
      quote: row.quote_currency.toUpperCase()
    })))

export const decodeCandles: Decoder<ReadonlyArray<Candle>> = Schema.decodeUnknownExit(Schema.Array(Candle))

const decodeTickerBody = Schema.decodeUnknownExit(TickerBody)
export const decodeTicker: Decoder<Ticker> = (json) =>
  Exit.map(decodeTickerBody(json), (body) => ({ price: body.price, time: Date.parse(body.time) }))

export const decodeStats: Decoder<Stats> = Schema.decodeUnknownExit(StatsBody)

const decodeJsonText = Schema.decodeUnknownExit(Schema.fromJsonString(Schema.Unknown))
const decodeErrorBody = Schema.decodeUnknownExit(ErrorBody)

const clip = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

/** Coinbase's `message`, or the JSON as text; undefined when the body is not JSON. */
const upstreamErrorMessage = (body: string): string | undefined => {
  const json = decodeJsonText(body)
  if (Exit.isFailure(json)) return undefined
  const parsed = decodeErrorBody(json.value)
  return Exit.isSuccess(parsed) ? parsed.value.message : clip(JSON.stringify(json.value))
}

const bodyKind = (body: string) => (/^\s*</.test(body) ? "an HTML page" : body.trim() === "" ? "an empty body" : "a non-JSON body")

/** One upstream answer as received. */
export interface RawResponse {
  readonly status: number
  readonly body: string
}

/** Status and body → value or typed failure. A 429 carries `rateLimitedSeconds` (Coinbase sends no Retry-After). */
export const interpretResponse = <A>(
  what: string,
  raw: RawResponse,
  decode: Decoder<A>,
  rateLimitedSeconds: number
): Effect.Effect<A, CoinbaseError> => {
  const { body, status } = raw
  if (status >= 200 && status < 300) {
    const json = decodeJsonText(body)
    if (Exit.isFailure(json)) {
      return failWith("invalid-response", `${what}: ${status} with ${bodyKind(body)} that is not complete JSON (${body.length} chars)`)
    }
    const decoded = decode(json.value)
    if (Exit.isFailure(decoded)) {
      const issue = Option.match(Cause.findErrorOption(decoded.cause), { onNone: () => "undecodable", onSome: (e) => e.message })
      return failWith("invalid-response", `${what}: unexpected body shape: ${clip(issue)}`)
    }
    return Effect.succeed(decoded.value)
  }
  const message = upstreamErrorMessage(body)
  const said = message ?? bodyKind(body)
  if (status === 429) return failWith("rate-limited", `${what}: 429 (${clip(said)})`, rateLimitedSeconds)
  if (status === 404 && message !== undefined) return failWith("not-found", `${what}: 404 (${clip(said)})`)
  if (status === 408 || status >= 500) return failWith("transient", `${what}: ${status} (${clip(said)})`)
  return failWith("rejected", `${what}: unexpected ${status} (${clip(said)})`)
}
