/**
 * Reading a small JSON body at the edge without consuming it for good: when the edge does not answer
 * the request itself, the bytes are put back on the stream and the HttpApi reads them as if nobody had.
 */
import type { IncomingMessage } from "node:http"

/** What `take` gets for a body that is not JSON. */
export const unparsable: unique symbol = Symbol("unparsable")

// As the platform decodes a body before JSON.parse (NodeHttpIncomingMessage): a BOM is dropped.
const decoder = new TextDecoder()

/**
 * Reads `length` bytes, parses them as JSON once and offers the value (or `unparsable`) to `take`;
 * when `take` declines (false) or the client goes away mid-body, the body is unshifted and `next` runs.
 */
export const readSmallJsonBody = (
  req: IncomingMessage,
  length: number,
  take: (body: unknown) => boolean,
  next: () => void
) => {
  const chunks: Array<Buffer> = []
  let size = 0
  const done = () => {
    req.off("readable", onReadable)
    req.off("error", onGone)
    req.off("close", onGone)
  }
  const onGone = () => {
    done()
    if (chunks.length > 0) req.unshift(Buffer.concat(chunks))
    next()
  }
  const onReadable = () => {
    let chunk: Buffer | null
    while (size < length && (chunk = req.read() as Buffer | null) !== null) {
      chunks.push(chunk)
      size += chunk.length
    }
    if (size < length) return
    done()
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
    let json: unknown
    try {
      json = JSON.parse(decoder.decode(body))
    } catch {
      json = unparsable
    }
    if (take(json)) return
    // Synchronously, before 'end' is due (Readable checks for "one last unshift").
    req.unshift(body)
    next()
  }
  req.on("readable", onReadable)
  req.on("error", onGone)
  req.on("close", onGone)
}
