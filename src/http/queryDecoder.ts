/**
 * A GET's query decoded at the edge as the HttpApi would decode it: the request target's query string
 * parsed as the HttpApi's router parses it (the router is given here: `+` as a space, percent-decoding,
 * a repeated name as an array of its values), then the endpoint's query schema with its parse options.
 *
 * Popular queries repeat byte for byte (a landing page's, and a CDN's revalidations): outcomes are
 * remembered by the request target, refusals apart in a smaller memory, as bodyDecoder.ts does for bodies.
 */
import { Exit, type SchemaIssue } from "effect"
import { makeBoundedLru } from "../platform/boundedLru.ts"
import { deepFreeze } from "../platform/deepFreeze.ts"

export type QueryDecoding = Exit.Exit<unknown, SchemaIssue.Issue>

/** The query string's parameters, as the HttpApi's router hands them to HttpApiBuilder. */
export type SearchParams = Readonly<Record<string, string | ReadonlyArray<string>>>

interface Bounds {
  readonly maxEntries: number
  readonly maxBytes: number
}

export const makeQueryDecoder = (
  searchParamsOf: (target: string) => SearchParams,
  decodeQuery: (params: SearchParams) => QueryDecoding,
  bounds: { readonly decoded: Bounds; readonly refused: Bounds } = {
    decoded: { maxEntries: 1_024, maxBytes: 256 * 1024 },
    refused: { maxEntries: 256, maxBytes: 64 * 1024 }
  }
): (target: string) => QueryDecoding => {
  const bytesOf = (target: string) => target.length
  const decoded = makeBoundedLru<QueryDecoding>({ ...bounds.decoded, bytesOf })
  const refused = makeBoundedLru<QueryDecoding>({ ...bounds.refused, bytesOf })
  return (target) => {
    const known = decoded.get(target) ?? refused.get(target)
    if (known !== undefined) return known
    const query = decodeQuery(searchParamsOf(target))
    // Shared by every later request with this target: frozen, so no reader can change it for the others.
    if (Exit.isSuccess(query)) decoded.put(target, Exit.succeed(deepFreeze(query.value)))
    else refused.put(target, query)
    return query
  }
}
