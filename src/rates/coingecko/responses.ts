/** What CoinGecko answers, read: the bodies we use and its error shapes (CoinGeckoClient.ts and upstreamCall.ts use them). */
import { Exit, Schema } from "effect"
import type { Decoder } from "../upstreamCall.ts"
import { clip } from "../upstreamCall.ts"

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
/** `/coins/{id}/market_chart/range`: `[epoch ms, price]`; CoinGecko sometimes sends a null price. */
const MarketChartBody = Schema.Struct({
  prices: Schema.Array(Schema.Tuple([Schema.Finite, Schema.NullOr(Schema.Finite)]))
})
export type ChartPoint = readonly [number, number | null]

export const decodeMarkets: Decoder<ReadonlyArray<MarketRow>> = Schema.decodeUnknownExit(Schema.Array(MarketRow))
export const decodeCoinList: Decoder<ReadonlyArray<ListedCoin>> = Schema.decodeUnknownExit(Schema.Array(ListedCoin))
export const decodeSupportedCurrencies: Decoder<ReadonlyArray<string>> = Schema.decodeUnknownExit(Schema.Array(Schema.String))
export const decodeMarketChart: Decoder<typeof MarketChartBody.Type> = Schema.decodeUnknownExit(MarketChartBody)

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
const decodeErrorBody = Schema.decodeUnknownExit(ErrorBody)

const describeStatus = (status: typeof ErrorStatus.Type) =>
  [status.error_code === undefined ? undefined : `code ${status.error_code}`, status.error_message]
    .filter((part) => part !== undefined).join(": ") || "no message"

/** CoinGecko's own code for its error (10012, 429, ...), when its body gives one. */
const errorCodeOf = (json: unknown): number | string | undefined => {
  const parsed = decodeErrorBody(json)
  if (Exit.isFailure(parsed)) return undefined
  const value = parsed.value
  if ("status" in value) return value.status.error_code
  return typeof value.error === "string" ? undefined : value.error.status.error_code
}

/** Demo's (and keyless) history ends 365 days back; older is 401 with this code (docs/upstreams.md §1). */
const BEYOND_PLAN_HISTORY = 10012

/** The refusals CoinGecko explains itself: the plan's history, which is no refused key (upstreamCall.ts `ownRefusal`). */
export const ownRefusal = (status: number, json: unknown) =>
  status === 401 && Number(errorCodeOf(json)) === BEYOND_PLAN_HISTORY
    ? { reason: "BeyondPlan" as const, detail: "asked beyond the plan's history (Demo: the past 365 days)" }
    : undefined

/** What CoinGecko said about its error, for logs and the error's reason. */
export const errorMessage = (json: unknown): string => {
  const parsed = decodeErrorBody(json)
  if (Exit.isFailure(parsed)) return clip(JSON.stringify(json))
  const value = parsed.value
  if ("status" in value) return describeStatus(value.status)
  return typeof value.error === "string" ? value.error : describeStatus(value.error.status)
}

