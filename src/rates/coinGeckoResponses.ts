/**
 * What CoinGecko answers, read: the bodies we use (validated with Schema) and every misbehaviour turned
 * into a typed `CoinGeckoError` (never a defect). No I/O here: CoinGeckoClient.ts sends, this reads.
 */
import { Cause, Data, Effect, Exit, Option, Schema } from "effect"
import { type UpstreamFailureKind } from "./upstreamFailure.ts"

export { toRatesError } from "./upstreamFailure.ts"

// ---------------------------------------------------------------------------------------------------
// Errors

export type CoinGeckoFailureKind = UpstreamFailureKind

export class CoinGeckoError extends Data.TaggedError("CoinGeckoError")<{
  readonly kind: CoinGeckoFailureKind
  readonly detail: string
  /** Whole seconds to wait before asking again; meaningful for rate-limited, circuit-open, unavailable. */
  readonly retryAfterSeconds: number
}> {
  override get message() {
    return `CoinGecko ${this.kind}: ${this.detail}`
  }
}

export const failWith = (kind: CoinGeckoFailureKind, detail: string, retryAfterSeconds = 0) =>
  Effect.fail(new CoinGeckoError({ kind, detail, retryAfterSeconds }))

// ---------------------------------------------------------------------------------------------------
// Bodies

const NullableNumber = Schema.optional(Schema.NullOr(Schema.Finite))

/** One row of `/coins/markets`. Only what we read; extra members are ignored. */
export const MarketRow = Schema.Struct({
  id: Schema.NonEmptyString,
  symbol: Schema.String,
  name: Schema.String,
  current_price: Schema.NullOr(Schema.Finite),
  market_cap_rank: NullableNumber,
  price_change_percentage_24h: NullableNumber,
  price_change_percentage_24h_in_currency: NullableNumber,
  price_change_percentage_7d_in_currency: NullableNumber,
  price_change_percentage_30d_in_currency: NullableNumber
})
export type MarketRow = typeof MarketRow.Type

/** One row of `/coins/list`. */
export const ListedCoin = Schema.Struct({ id: Schema.NonEmptyString, symbol: Schema.String, name: Schema.String })
export type ListedCoin = typeof ListedCoin.Type

/** `/coins/{id}/market_chart` and `.../market_chart/range`: `[epoch ms, price]`; CoinGecko sometimes sends a null price. */
const MarketChartBody = Schema.Struct({
  prices: Schema.Array(Schema.Tuple([Schema.Finite, Schema.NullOr(Schema.Finite)]))
})
export type ChartPoint = readonly [number, number | null]

/** CoinGecko's three error shapes (the docs, the 365-day error, and the 404 respectively). */
const ErrorStatus = Schema.Struct({
  error_code: Schema.optional(Schema.Union([Schema.Number, Schema.String])),
  error_message: Schema.optional(Schema.String)
})
const ErrorBody = Schema.Union([
  Schema.Struct({ status: ErrorStatus }),
  Schema.Struct({ error: Schema.Struct({ status: ErrorStatus }) }),
  Schema.Struct({ error: Schema.String })
])

export type Decoder<A> = (json: unknown) => Exit.Exit<A, Schema.SchemaError>

export const decodeMarkets: Decoder<ReadonlyArray<MarketRow>> = Schema.decodeUnknownExit(Schema.Array(MarketRow))
export const decodeCoinList: Decoder<ReadonlyArray<ListedCoin>> = Schema.decodeUnknownExit(Schema.Array(ListedCoin))
export const decodeSupportedCurrencies: Decoder<ReadonlyArray<string>> = Schema.decodeUnknownExit(Schema.Array(Schema.String))
const decodeMarketChartBody = Schema.decodeUnknownExit(MarketChartBody)
export const decodeMarketChart: Decoder<ReadonlyArray<ChartPoint>> = (json) => Exit.map(decodeMarketChartBody(json), (body) => body.prices)

const decodeJsonText = Schema.decodeUnknownExit(Schema.fromJsonString(Schema.Unknown))
const decodeErrorBody = Schema.decodeUnknownExit(ErrorBody)

const clip = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

/** What the upstream said about its error, for logs and the error `reason`; undefined when it is not JSON. */
const upstreamErrorMessage = (body: string): string | undefined => {
  const json = decodeJsonText(body)
  if (Exit.isFailure(json)) return undefined
  const parsed = decodeErrorBody(json.value)
  if (Exit.isFailure(parsed)) return clip(JSON.stringify(json.value))
  const value = parsed.value
  if ("status" in value) return describeStatus(value.status)
  return typeof value.error === "string" ? value.error : describeStatus(value.error.status)
}

const describeStatus = (status: typeof ErrorStatus.Type) =>
  [status.error_code === undefined ? undefined : `code ${status.error_code}`, status.error_message]
    .filter((part) => part !== undefined).join(": ") || "no message"

const bodyKind = (body: string) => (/^\s*</.test(body) ? "an HTML page" : body.trim() === "" ? "an empty body" : "a non-JSON body")

/** One upstream answer as received. */
export interface RawResponse {
  readonly status: number
  readonly body: string
}

/**
 * Status and body → value or typed failure. `retryAfterSeconds` is asked only for a 429 (the caller
 * reads the header and starts its cool-down).
 */
export const interpretResponse = <A>(
  what: string,
  raw: RawResponse,
  decode: Decoder<A>,
  retryAfterSeconds: () => number
): Effect.Effect<A, CoinGeckoError> => {
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
  const said = upstreamErrorMessage(body) ?? bodyKind(body)
  if (status === 429) return failWith("rate-limited", `${what}: 429 (${clip(said)})`, retryAfterSeconds())
  if (status === 404 && upstreamErrorMessage(body) !== undefined) return failWith("not-found", `${what}: 404 (${clip(said)})`)
  if (status === 401 || status === 403) return failWith("rejected", `${what}: ${status}, our API key was refused (${clip(said)})`)
  if (status === 408 || status >= 500) return failWith("transient", `${what}: ${status} (${clip(said)})`)
  return failWith("rejected", `${what}: unexpected ${status} (${clip(said)})`)
}
