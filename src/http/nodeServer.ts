/**
 * The Node HTTP server. Effect's NodeHttpServer listens when its Layer is built but attaches its
 * request handler only when the app is served; a request arriving in between would get no answer
 * ever. Such early requests are held here and handed to the handler as soon as it is attached.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void

export const createAppServer = (): Server => {
  // Slow-loris protection: bounded time to send headers and the whole request.
  const server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 })
  const early: Array<[IncomingMessage, ServerResponse]> = []
  const hold: RequestListener = (req, res) => void early.push([req, res])
  const onNewListener = (event: string | symbol, listener: RequestListener) => {
    if (event !== "request" || listener === hold) return
    server.off("newListener", onNewListener)
    server.off("request", hold)
    // `newListener` fires before the listener is added: replay once it is in place.
    queueMicrotask(() => {
      for (const [req, res] of early.splice(0)) listener.call(server, req, res)
    })
  }
  server.on("request", hold)
  server.on("newListener", onNewListener)
  return server
}
