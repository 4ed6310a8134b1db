/**
 * The stream's bytes on the wire (C10, docs/prices.md): each event serialised once, shared by every stream
 * that sends it. The JSON members are in the documented order.
 */
import type { HeldPrice } from "./PriceSource.ts"

/** First on every stream: how long a client waits before reconnecting (milliseconds). */
const retryField = "retry: 3000\n\n"
/** A comment line: keeps proxies and the reader's idle timers from closing a silent stream. */
export const heartbeat: Uint8Array = Buffer.from(":\n\n")

const priceJson = (symbol: string, held: HeldPrice) =>
  `{"symbol":${JSON.stringify(symbol)},"price":${held.price},"change24h":${held.change24h === null ? "null" : held.change24h},` +
  `"at":"${new Date(held.at).toISOString()}","source":"${held.source}"}`

export const priceEvent = (id: number, symbol: string, held: HeldPrice): Uint8Array =>
  Buffer.from(`id: ${id}\nevent: price\ndata: ${priceJson(symbol, held)}\n\n`)

/** The retry field and the snapshot event of one stream: what is held now, in the query's order. */
export const opening = (
  id: number,
  currency: string,
  prices: ReadonlyArray<readonly [string, HeldPrice]>,
  unknown: ReadonlyArray<string>
): Uint8Array =>
  Buffer.from(
    `${retryField}id: ${id}\nevent: snapshot\ndata: {"currency":${JSON.stringify(currency.toUpperCase())},"prices":[` +
      prices.map(([symbol, held]) => priceJson(symbol, held)).join(",") + `],"unknown":${JSON.stringify(unknown)}}\n\n`
  )
