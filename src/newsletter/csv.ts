/** CSV for the subscriber export (RFC 4180: CRLF line ends, fields quoted when they need it). */
import type { Subscriber } from "./local.ts"

const HEADER = ["email", "locale", "subscribed_at"] as const

/**
 * Quotes a field holding a comma, a double quote, CR or LF, doubling inner quotes. Values are kept
 * exactly (no spreadsheet-formula escaping), since the export feeds mail tools, not spreadsheets.
 */
const csvField = (value: string): string => /[",\r\n]/.test(value) ? `"${value.replaceAll("\"", "\"\"")}"` : value

export const subscribersCsv = (subscribers: ReadonlyArray<Subscriber>): string =>
  [HEADER.join(","), ...subscribers.map((s) => [s.email, s.locale, s.subscribed_at].map(csvField).join(","))]
    .map((line) => `${line}\r\n`)
    .join("")
