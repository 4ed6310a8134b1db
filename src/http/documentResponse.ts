/**
 * Documents served as they are (the reference page and its script, the OpenAPI document, problem
 * pages): each representation is encoded once, gzip and brotli included, with a strong ETag, so a
 * request costs a header comparison and a write (C9: compressed when accepted, revalidatable).
 */
import { promisify } from "node:util"
import * as zlib from "node:zlib"
import { Effect } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { bodyTag, ifNoneMatchMatches } from "./conditional.ts"

const gzip = promisify(zlib.gzip)
const brotli = promisify(zlib.brotliCompress)

type Coding = "br" | "gzip" | "identity"

interface Representation {
  readonly body: Uint8Array
  readonly etag: string
}

/** Below this, compression saves about as much as the headers it adds. */
const minCompressBytes = 256

export interface Document {
  /** The representation the request accepts (Accept-Encoding), or 304 when its ETag matches. */
  readonly respond: (request: HttpServerRequest.HttpServerRequest) => HttpServerResponse.HttpServerResponse
}

export interface DocumentOptions {
  readonly contentType: string
  readonly cacheControl: string
  /** Headers of every response of this document (CSP, Vary: Accept...). */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/** Encodes `body` once (off the event loop: zlib's thread pool) into its three representations. */
export const makeDocument = (body: string | Uint8Array, options: DocumentOptions): Effect.Effect<Document> =>
  Effect.promise(async () => {
    const identity = typeof body === "string" ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength)
    const tag = bodyTag(identity)
    const compressible = identity.byteLength >= minCompressBytes
    const [gz, br] = compressible
      ? await Promise.all([
        gzip(identity, { level: 9 }),
        // Quality 6: within 2% of 9 on the reference script, a third of its time; 11 takes ~20 s.
        brotli(identity, {
          params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 6, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: identity.byteLength }
        })
      ])
      : [undefined, undefined]
    // A strong ETag names one representation: each coding has its own (RFC 9110 §8.8.3).
    const representations: Partial<Record<Coding, Representation>> = {
      identity: { body: identity, etag: `"${tag}"` },
      ...(gz === undefined ? {} : { gzip: { body: gz, etag: `"${tag}-gz"` } }),
      ...(br === undefined ? {} : { br: { body: br, etag: `"${tag}-br"` } })
    }
    const common = {
      "cache-control": options.cacheControl,
      ...(compressible ? { vary: "Accept-Encoding" } : {}),
      ...options.headers
    }
    return {
      respond: (request) => {
        const coding = compressible ? preferredCoding(request.headers["accept-encoding"]) : "identity"
        const chosen = representations[coding] ?? representations.identity!
        const headers: Record<string, string> = { ...common, etag: chosen.etag }
        if (ifNoneMatchMatches(request.headers["if-none-match"], chosen.etag)) {
          return HttpServerResponse.empty({ status: 304, headers })
        }
        if (coding !== "identity") headers["content-encoding"] = coding
        return HttpServerResponse.uint8Array(chosen.body, { contentType: options.contentType, headers })
      }
    }
  })

/** The coding to send for an Accept-Encoding field (RFC 9110 §12.5.3): br, then gzip, else identity. */
const preferredCoding = (field: string | undefined): Coding => {
  if (field === undefined) return "identity"
  const weights = new Map<string, number>()
  for (const part of field.split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";")
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="))
    const weight = q === undefined ? 1 : Number(q.slice(2))
    if (name !== undefined && name !== "") weights.set(name, Number.isFinite(weight) ? weight : 0)
  }
  const weightOf = (coding: string) => weights.get(coding) ?? weights.get("*") ?? 0
  const br = weightOf("br")
  const gz = Math.max(weightOf("gzip"), weights.get("x-gzip") ?? 0)
  if (br > 0 && br >= gz) return "br"
  if (gz > 0) return "gzip"
  return "identity"
}

/** The document's response for the current request. */
export const respondWith = (document: Document) => Effect.map(Effect.service(HttpServerRequest.HttpServerRequest), document.respond)
