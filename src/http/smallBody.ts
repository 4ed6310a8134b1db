/**
 * Reading a small body at the edge without consuming it for good: when the edge does not answer the
 * request itself, the bytes are put back on the stream and the HttpApi reads them as if nobody had.
 */
import type { IncomingMessage } from "node:http"

/**
 * Reads `length` bytes and offers them to `take`; when `take` declines (false) or the client goes
 * away mid-body, the body is unshifted and `next` runs.
 */
export const readSmallBody = (
  req: IncomingMessage,
  length: number,
  take: (body: Buffer) => boolean,
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
    if (take(body)) return
    // Synchronously, before 'end' is due (Readable checks for "one last unshift").
    req.unshift(body)
    next()
  }
  req.on("readable", onReadable)
  req.on("error", onGone)
  req.on("close", onGone)
}
