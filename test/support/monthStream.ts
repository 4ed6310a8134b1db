/**
 * One live price stream (`GET /api/v1/prices/stream`) held through a simulated month (simulatedMonth.ts
 * `stream`): opened once from one address, read to the end, and what it received counted (price events per
 * symbol and source, the last `at` per symbol, snapshots, heartbeat comments), and whether it was still open.
 */
import { request } from "node:http"

export interface StreamSeen {
  /** The open's status (200, or the refusal). */
  readonly status: number
  /** Still open when asked (the service never closed it). */
  readonly open: boolean
  readonly events: number
  readonly bySymbol: Readonly<Record<string, number>>
  readonly bySource: Readonly<Record<string, number>>
  /** The newest `at` received per symbol (epoch ms). */
  readonly lastAt: Readonly<Record<string, number>>
  readonly snapshots: number
  readonly heartbeats: number
}

interface PriceEvent {
  readonly symbol: string
  readonly at: string
  readonly source: string
}

/** Opens the stream; resolves once its head is in (a refusal: `seen().status`, closed). */
export const holdStream = (origin: string, cryptos: ReadonlyArray<string>, address: string) =>
  new Promise<{ readonly seen: () => StreamSeen; readonly close: () => void }>((done, reject) => {
    const counts = { status: 0, open: false, events: 0, snapshots: 0, heartbeats: 0 }
    const bySymbol: Record<string, number> = {}
    const bySource: Record<string, number> = {}
    const lastAt: Record<string, number> = {}
    const seen = (): StreamSeen => ({ ...counts, bySymbol: { ...bySymbol }, bySource: { ...bySource }, lastAt: { ...lastAt } })
    let carry = ""
    const read = (block: string) => {
      if (block.startsWith(":")) return void counts.heartbeats++
      const lines = block.split("\n")
      const event = lines.find((l) => l.startsWith("event: "))?.slice(7)
      const data = lines.find((l) => l.startsWith("data: "))?.slice(6)
      if (event === "snapshot") counts.snapshots++
      if (event !== "price" || data === undefined) return
      const price = JSON.parse(data) as PriceEvent
      counts.events++
      bySymbol[price.symbol] = (bySymbol[price.symbol] ?? 0) + 1
      bySource[price.source] = (bySource[price.source] ?? 0) + 1
      lastAt[price.symbol] = Math.max(lastAt[price.symbol] ?? 0, Date.parse(price.at))
    }
    const req = request(`${origin}/api/v1/prices/stream?cryptos=${cryptos.join(",")}`, { agent: false, headers: { accept: "text/event-stream", "x-forwarded-for": address } }, (res) => {
      counts.status = res.statusCode ?? 0
      counts.open = counts.status === 200
      if (!counts.open) res.resume()
      res.setEncoding("utf8")
      res.on("data", (text: string) => {
        const blocks = (carry + text).split("\n\n")
        carry = blocks.pop()!
        for (const block of blocks) read(block)
      })
      res.on("close", () => void (counts.open = false))
      done({ seen, close: () => req.destroy() })
    })
    req.on("error", (error) => (counts.status === 0 ? reject(error) : void (counts.open = false)))
    req.end()
  })
