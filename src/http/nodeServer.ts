/**
 * The Node HTTP server. Every request event passes the front door first (the fast lane, which
 * answers it or hands it on), then reaches the Effect app's listener.
 *
 * Effect's NodeHttpServer listens when its Layer is built but attaches its request listener only
 * when the app is served; a request arriving in between would get no answer ever. Such early
 * requests are held here and dispatched as soon as the listener is attached.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"

/** Answers the request or calls `next` to hand it to the app. */
export type FrontDoor = (req: IncomingMessage, res: ServerResponse, next: () => void) => void

export const createAppServer = (frontDoor?: FrontDoor): Server => {
  // Slow-loris protection: bounded time to send headers and the whole request.
  const server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 })
  const early: Array<[IncomingMessage, ServerResponse]> = []
  const emit = server.emit.bind(server) as (event: string | symbol, ...args: Array<unknown>) => boolean

  const dispatch = (req: IncomingMessage, res: ServerResponse) => {
    if (server.listenerCount("request") === 0) return void early.push([req, res])
    if (frontDoor === undefined) return void emit("request", req, res)
    frontDoor(req, res, () => emit("request", req, res))
  }
  // Node's HTTP server announces each parsed request with emit("request", req, res).
  server.emit = ((event: string | symbol, ...args: Array<unknown>) => {
    if (event !== "request") return emit(event, ...args)
    dispatch(args[0] as IncomingMessage, args[1] as ServerResponse)
    return true
  }) as typeof server.emit
  server.on("newListener", (event) => {
    // `newListener` fires before the listener is added: dispatch once it is in place.
    if (event === "request") queueMicrotask(() => {
      for (const [req, res] of early.splice(0)) dispatch(req, res)
    })
  })
  return server
}
