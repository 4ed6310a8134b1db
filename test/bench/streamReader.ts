/**
 * A reader process of the stream mode (streamMode.ts): holds many server-sent event streams of one URL on raw
 * `node:net` sockets (a request written by hand, the response's head, chunked framing and SSE text scanned as
 * bytes: no HTTP client objects, no string per event), and counts what arrives. Started with an IPC channel;
 * the parent says (`ReaderCommand`) and it answers (`ReaderReply`):
 *   open   → open `count` more streams (at most `concurrency` being opened at once), `perAddress` from each
 *            local address `addressBase`.x.y in turn (the service's per-address limits stay as shipped);
 *            answers `opened` once each has its 200 head, a refusal or an error
 *   mark   → the measured window starts: window counts set to zero; answers `marked`
 *   report → answers `report`: streams open now, price events and lags (receipt − the event's `at`, ms) since
 *            the mark, streams the service closed and streams refused or failed since the start
 *   close  → every socket destroyed, then exit
 * Lags are kept as a histogram of whole milliseconds (the parent adds the readers' and takes percentiles).
 */
import { connect, type Socket } from "node:net"
import { monitorEventLoopDelay } from "node:perf_hooks"

export type ReaderCommand =
  | { readonly type: "open"; readonly count: number; readonly host: string; readonly port: number; readonly path: string; readonly addressBase: string; readonly perAddress: number; readonly concurrency: number }
  | { readonly type: "mark" }
  | { readonly type: "report" }
  | { readonly type: "close" }

export interface ReaderReport {
  readonly open: number
  /** Price events since the mark, and their lags: [lag ms, count] pairs (sparse), the largest lag. */
  readonly events: number
  readonly lags: ReadonlyArray<readonly [number, number]>
  readonly maxLagMs: number
  /** Snapshots and comment lines (heartbeats) since the mark. */
  readonly snapshots: number
  readonly comments: number
  /** Since the start: streams the service ended after its 200; opens refused (status → count) or failed. */
  readonly closedByService: number
  readonly refused: Readonly<Record<string, number>>
  readonly failed: number
  /** Event ids that did not increase within a stream (since the start). */
  readonly idsOutOfOrder: number
  /** This reader's event-loop delay since the mark (p99, max; ms): a late reader adds to the lags it measures. */
  readonly loopDelayMs: { readonly p99: number; readonly max: number }
}

export type ReaderReply =
  | { readonly type: "opened"; readonly open: number; readonly refused: Readonly<Record<string, number>>; readonly failed: number }
  | { readonly type: "marked" }
  | ({ readonly type: "report" } & ReaderReport)

const CRLF2 = Buffer.from("\r\n\r\n")
const LF2 = Buffer.from("\n\n")
const PRICE = Buffer.from("event: price\n")
const SNAPSHOT = Buffer.from("event: snapshot\n")
const AT = Buffer.from('"at":"')
const ID = Buffer.from("id: ")
const MAX_LAG_MS = 120_000
/** Set when the parent says close: the sockets destroyed then are not the service's doing. */
let closingAll = false

/** Counts shared by every stream of this reader. */
export class Tally {
  events = 0
  snapshots = 0
  comments = 0
  closedByService = 0
  failed = 0
  idsOutOfOrder = 0
  maxLagMs = 0
  refused: Record<string, number> = {}
  lags = new Uint32Array(MAX_LAG_MS + 1)
  mark() {
    this.events = 0
    this.snapshots = 0
    this.comments = 0
    this.maxLagMs = 0
    this.lags.fill(0)
  }
  lag(ms: number) {
    const whole = Math.max(0, Math.round(ms))
    this.lags[Math.min(whole, MAX_LAG_MS)]!++
    if (whole > this.maxLagMs) this.maxLagMs = whole
  }
  sparseLags(): Array<[number, number]> {
    const out: Array<[number, number]> = []
    for (let ms = 0; ms <= MAX_LAG_MS; ms++) if (this.lags[ms]! > 0) out.push([ms, this.lags[ms]!])
    return out
  }
}

/**
 * One stream's bytes after the response head: chunked framing undone when `chunked`, SSE events (up to
 * their blank line) scanned; a partial event waits for the next bytes. `now` is the receipt time of the bytes.
 */
export class SseScanner {
  private readonly tally: Tally
  private readonly chunked: boolean
  private carry: Buffer | undefined
  /** Chunked framing: bytes of the current chunk still to come, or -1 while a size line is read. */
  private left = -1
  private sizeLine = ""
  private skipCrlf = 0
  private lastId = -1
  constructor(tally: Tally, chunked: boolean) {
    this.tally = tally
    this.chunked = chunked
  }
  feed(bytes: Buffer, now: number) {
    if (!this.chunked) return this.payload(bytes, now)
    let at = 0
    while (at < bytes.length) {
      if (this.skipCrlf > 0) {
        const n = Math.min(this.skipCrlf, bytes.length - at)
        this.skipCrlf -= n
        at += n
      } else if (this.left < 0) {
        const end = bytes.indexOf(10, at)
        this.sizeLine += bytes.toString("latin1", at, end === -1 ? bytes.length : end)
        if (end === -1) return
        at = end + 1
        this.left = Number.parseInt(this.sizeLine, 16)
        this.sizeLine = ""
        if (!(this.left >= 0)) throw new Error("bad chunk size")
        if (this.left === 0) return // last chunk: the stream ends
      } else {
        const n = Math.min(this.left, bytes.length - at)
        this.payload(bytes.subarray(at, at + n), now)
        this.left -= n
        at += n
        if (this.left === 0) {
          this.left = -1
          this.skipCrlf = 2
        }
      }
    }
  }
  private payload(bytes: Buffer, now: number) {
    const text = this.carry === undefined ? bytes : Buffer.concat([this.carry, bytes])
    const last = text.lastIndexOf(LF2)
    if (last === -1) {
      this.carry = Buffer.from(text)
      return
    }
    this.events(text, last + 2, now)
    this.carry = last + 2 === text.length ? undefined : Buffer.from(text.subarray(last + 2))
  }
  /** The complete events in text[0, end). */
  private events(text: Buffer, end: number, now: number) {
    for (let start = 0; start < end;) {
      const stop = text.indexOf(LF2, start) + 2
      const first = text[start]
      if (first === 58) this.tally.comments++ // ":" a comment
      else {
        const id = text.indexOf(ID, start)
        if (id !== -1 && id < stop) {
          const n = Number(text.toString("latin1", id + 4, text.indexOf(10, id)))
          if (!(n > this.lastId)) this.tally.idsOutOfOrder++
          this.lastId = n
        }
        const price = text.indexOf(PRICE, start)
        if (price !== -1 && price < stop) {
          this.tally.events++
          const at = text.indexOf(AT, price)
          if (at !== -1 && at < stop) this.tally.lag(now - Date.parse(text.toString("latin1", at + 6, text.indexOf(34, at + 6))))
        } else {
          const snapshot = text.indexOf(SNAPSHOT, start)
          if (snapshot !== -1 && snapshot < stop) this.tally.snapshots++
        }
      }
      start = stop
    }
  }
}

/** Opens one stream; resolves once it is settled (its 200 head, a refusal, an error). */
const openStream = (tally: Tally, sockets: Set<Socket>, c: Extract<ReaderCommand, { type: "open" }>, localAddress: string) =>
  new Promise<void>((settled) => {
    const socket = connect({ host: c.host, port: c.port, localAddress })
    socket.setNoDelay(true)
    let head: Buffer | undefined = Buffer.alloc(0)
    let scanner: SseScanner | undefined
    let ours = false
    const timer = setTimeout(() => socket.destroy(new Error("no answer within 60 s")), 60_000)
    const settle = () => {
      clearTimeout(timer)
      settled()
    }
    socket.once("connect", () => socket.write(`GET ${c.path} HTTP/1.1\r\nhost: ${c.host}:${c.port}\r\naccept: text/event-stream\r\nuser-agent: stream-bench\r\n\r\n`))
    socket.on("data", (bytes: Buffer) => {
      const now = Date.now()
      if (scanner !== undefined) return scanner.feed(bytes, now)
      head = Buffer.concat([head!, bytes])
      const end = head.indexOf(CRLF2)
      if (end === -1) return
      const status = Number(head.toString("latin1", 9, 12))
      if (status !== 200) {
        tally.refused[status] = (tally.refused[status] ?? 0) + 1
        ours = true
        socket.destroy()
        return settle()
      }
      const lower = head.toString("latin1", 0, end).toLowerCase()
      scanner = new SseScanner(tally, lower.includes("transfer-encoding: chunked"))
      const rest = head.subarray(end + 4)
      head = undefined
      sockets.add(socket)
      settle()
      if (rest.length > 0) scanner.feed(rest, now)
    })
    socket.on("error", () => {
      if (scanner === undefined && !ours) {
        tally.failed++
        ours = true
        settle()
      }
    })
    socket.on("close", () => {
      clearTimeout(timer)
      if (sockets.delete(socket) && !ours && !closingAll) tally.closedByService++
      else if (scanner === undefined && !ours) {
        tally.failed++
        settle()
      }
    })
  })

const run = () => {
  const tally = new Tally()
  const sockets = new Set<Socket>()
  let opened = 0
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  const reply = (message: ReaderReply) => process.send!(message)
  process.on("message", async (command: ReaderCommand) => {
    if (command.type === "open") {
      let next = 0
      const worker = async () => {
        while (next < command.count) {
          next++
          const a = Math.floor(opened++ / command.perAddress)
          await openStream(tally, sockets, command, `${command.addressBase}.${a >> 8}.${(a & 255) + 1}`)
        }
      }
      await Promise.all(Array.from({ length: Math.min(command.concurrency, command.count) }, worker))
      reply({ type: "opened", open: sockets.size, refused: tally.refused, failed: tally.failed })
    } else if (command.type === "mark") {
      tally.mark()
      loopDelay.reset()
      reply({ type: "marked" })
    } else if (command.type === "report") {
      reply({
        type: "report",
        open: sockets.size,
        events: tally.events,
        lags: tally.sparseLags(),
        maxLagMs: tally.maxLagMs,
        snapshots: tally.snapshots,
        comments: tally.comments,
        closedByService: tally.closedByService,
        refused: tally.refused,
        failed: tally.failed,
        idsOutOfOrder: tally.idsOutOfOrder,
        loopDelayMs: { p99: Math.round(loopDelay.percentile(99) / 1e6), max: Math.round(loopDelay.max / 1e6) }
      })
    } else {
      closingAll = true
      for (const socket of sockets) socket.destroy()
      process.disconnect()
      process.exit(0)
    }
  })
  // The parent gone: nothing to report to.
  process.on("disconnect", () => process.exit(0))
}

if (process.send !== undefined) run()
