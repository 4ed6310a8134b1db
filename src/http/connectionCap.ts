/**
 * At most `max` open connections per client address (IPv6 per /64, as C8 counts requests): a socket
 * over the cap is closed as soon as it is accepted, before anything is read from it, so one host
 * cannot hold the server's sockets (slow requests, idle connections). Trusted proxies are exempt:
 * every client behind one shares its address, and the proxy has its own limits.
 */
import type { Server } from "node:net"
import { addressBucket } from "./clientIp.ts"

export const capConnectionsPerAddress = (server: Server, max: number, isExempt: (peer: string) => boolean): void => {
  if (max <= 0) return
  const open = new Map<string, number>()
  server.on("connection", (socket) => {
    const peer = socket.remoteAddress
    if (peer === undefined || isExempt(peer)) return
    const bucket = addressBucket(peer)
    const count = (open.get(bucket) ?? 0) + 1
    if (count > max) return void socket.destroy()
    open.set(bucket, count)
    socket.once("close", () => {
      const left = open.get(bucket)! - 1
      if (left === 0) open.delete(bucket)
      else open.set(bucket, left)
    })
  })
}
