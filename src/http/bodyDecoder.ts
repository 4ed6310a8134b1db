/**
 * A small JSON request body decoded at the edge as the HttpApi would decode it: UTF-8 (a BOM dropped,
 * as the platform's `TextDecoder` does), `JSON.parse`, then the operation's payload schema.
 *
 * The same body text always decodes to the same outcome, and requests repeat byte for byte (popular
 * queries, and bots and broken clients sending the same junk): outcomes are remembered by their text,
 * so a repeated body skips the parse and the schema (and a junk one the SyntaxError, which V8 makes
 * costly: its message objects outlive the young generation). Refusals are kept apart, in a smaller
 * memory, so a flood of distinct junk never evicts the bodies that decode.
 */
import { Exit, type SchemaIssue } from "effect"
import { makeBoundedLru } from "../platform/boundedLru.ts"
import { deepFreeze } from "../platform/deepFreeze.ts"

export type BodyDecoding = Exit.Exit<unknown, SchemaIssue.Issue> | typeof unparsable

/** What decoding gives for a body that is not JSON. */
export const unparsable: unique symbol = Symbol("unparsable")

const utf8 = new TextDecoder()

/** `JSON.parse` of a body that may well be junk: its SyntaxError is never looked at, so no stack is captured. */
const parseJson = (text: string): unknown => {
  const stackTraceLimit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return JSON.parse(text)
  } catch {
    return unparsable
  } finally {
    Error.stackTraceLimit = stackTraceLimit
  }
}

interface Bounds {
  readonly maxEntries: number
  readonly maxBytes: number
}

export const makeBodyDecoder = (
  decodePayload: (json: unknown) => Exit.Exit<unknown, SchemaIssue.Issue>,
  bounds: { readonly decoded: Bounds; readonly refused: Bounds } = {
    decoded: { maxEntries: 1_024, maxBytes: 1024 * 1024 },
    refused: { maxEntries: 256, maxBytes: 256 * 1024 }
  }
): (bytes: Uint8Array) => BodyDecoding => {
  const bytesOf = (text: string) => text.length
  const decoded = makeBoundedLru<BodyDecoding>({ ...bounds.decoded, bytesOf })
  const refused = makeBoundedLru<BodyDecoding>({ ...bounds.refused, bytesOf })
  return (bytes) => {
    const text = utf8.decode(bytes)
    const known = decoded.get(text) ?? refused.get(text)
    if (known !== undefined) return known
    const json = parseJson(text)
    if (json === unparsable) {
      refused.put(text, unparsable)
      return unparsable
    }
    const payload = decodePayload(json)
    // Shared by every later request with this text: frozen, so no reader can change it for the others.
    if (Exit.isSuccess(payload)) decoded.put(text, Exit.succeed(deepFreeze(payload.value)))
    else refused.put(text, payload)
    return payload
  }
}
