/**
 * The price hub (C10, docs/prices.md): one per process. Streams are grouped by (currency, symbols); every
 * round it reads the held prices of the union of wanted symbols once per currency, serialises each changed
 * price once (a hub-wide id per change), and writes one buffer per group to every stream of the group. A
 * group sends a symbol at most once per `spacingMs` (4 a second): a change inside it waits for the first round
 * after, the latest winning, nothing queued. Rounds are shorter than the spacing so that a change waits a short
 * round, not a whole spacing, to go out. No fiber per stream: a stream is its response and its group's place;
 * a reader that lets `maxBufferedBytes` pile up is closed.
 */
import type { HeldPrice, HeldPrices, PriceSourceError } from "./PriceSource.ts"
import { heartbeat, opening, priceEvent } from "./wire.ts"

/** What a stream writes to: Node's ServerResponse, or the HttpApi's stream (handlers.ts). */
export interface StreamSink {
  readonly write: (chunk: Uint8Array) => unknown
  /** Bytes written and not yet taken by the reader. */
  readonly writableLength: number
  readonly end: () => unknown
  readonly destroy: () => unknown
  readonly once: (event: "close", listener: () => void) => unknown
}

/** Why a stream was not opened, before anything was written (the edge writes it as a problem). */
export type Refusal =
  | { readonly code: "no_valid_symbols"; readonly unknown: ReadonlyArray<string> }
  | { readonly code: "validation_failed"; readonly currency: string }
  | { readonly code: "rate_limited"; readonly retryAfter: number }
  | { readonly code: "service_unavailable"; readonly retryAfter: number; readonly detail: string }
  | { readonly code: "upstream_error" }

export interface OpenRequest {
  /** Upper-cased, de-duplicated, in request order. */
  readonly symbols: ReadonlyArray<string>
  /** Lower-case. */
  readonly currency: string
  /** Who opens it, as the limits count (an address's bucket, IPv6 per /64). */
  readonly bucket: string
  /** Noted once in the rates demand. */
  readonly caller: string | undefined
}

export interface OpenAnswer {
  readonly refuse: (refusal: Refusal) => void
  /** Writes the 200 head; the sink to stream to, or undefined (HEAD, or the client left): nothing to stream. */
  readonly start: () => StreamSink | undefined
}

export interface HubOptions {
  /** How often held prices are read and changes written (production 50 ms). */
  readonly roundMs: number
  /** The least time between two events of one symbol in a group (production 250 ms: at most 4 a second). */
  readonly spacingMs: number
  /** A comment line after this much silence (production 15 s). */
  readonly heartbeatMs: number
  /** A stream whose unread bytes exceed this is closed for lagging. */
  readonly maxBufferedBytes: number
  readonly maxPerAddress: number
  readonly maxStreams: number
  /** Reads the held prices; calls back once. */
  readonly read: (query: { readonly symbols: ReadonlyArray<string>; readonly currency: string; readonly caller?: string | undefined }, done: (result: HeldPrices | PriceSourceError) => void) => void
  readonly now: () => number
  readonly metrics?: {
    readonly open: (count: number) => void
    readonly events: (count: number) => void
    readonly lagging: () => void
  } | undefined
}

/** Seconds a refused opener should wait: a slot frees when another stream of its address closes. */
const PER_ADDRESS_RETRY_S = 30
const PROCESS_RETRY_S = 10

interface SymbolState {
  held: HeldPrice | undefined
  /** The id of its last change; 0: never held. */
  id: number
  event: Uint8Array | undefined
  dirty: boolean
}

interface Group {
  readonly key: string
  readonly currency: CurrencyState
  readonly symbols: ReadonlyArray<string>
  /** Per symbol, the id and the price this group's streams hold (a joining stream's snapshot). */
  readonly sent: Array<number>
  readonly sentHeld: Array<HeldPrice | undefined>
  /** Per symbol, when this group last sent it (the spacing). */
  readonly sentAt: Array<number>
  /** The highest id its streams have seen (events and snapshots): an event sent later gets a higher one. */
  seenId: number
  readonly streams: Set<Stream>
  lastWriteAt: number
}

interface Stream {
  readonly sink: StreamSink
  readonly group: Group
  readonly bucket: string
  closed: boolean
}

interface CurrencyState {
  readonly currency: string
  readonly symbols: Map<string, SymbolState>
  readonly groups: Set<Group>
  wanted: ReadonlyArray<string> | undefined
  reading: boolean
}

const isError = (result: HeldPrices | PriceSourceError): result is PriceSourceError => "_tag" in result

const samePrice = (a: HeldPrice | undefined, b: HeldPrice) =>
  a !== undefined && a.price === b.price && a.change24h === b.change24h && a.source === b.source

export const makeHub = (options: HubOptions) => {
  const currencies = new Map<string, CurrencyState>()
  const groups = new Map<string, Group>()
  const perAddress = new Map<string, number>()
  let open = 0
  let reserved = 0
  let lastId = 0
  let ended = false

  const count = (delta: number) => {
    open += delta
    options.metrics?.open(open)
  }
  const release = (bucket: string) => {
    reserved--
    const n = (perAddress.get(bucket) ?? 1) - 1
    if (n === 0) perAddress.delete(bucket)
    else perAddress.set(bucket, n)
  }

  const currencyOf = (currency: string) => {
    let state = currencies.get(currency)
    if (state === undefined) currencies.set(currency, state = { currency, symbols: new Map(), groups: new Set(), wanted: undefined, reading: false })
    return state
  }

  /** Takes a read into the held state: a changed price is marked, to get its id and bytes at the next flush. */
  const merge = (state: CurrencyState, prices: ReadonlyMap<string, HeldPrice>) => {
    for (const [symbol, held] of prices) {
      const known = state.symbols.get(symbol)
      if (known === undefined) state.symbols.set(symbol, { held, id: 0, event: undefined, dirty: true })
      else if (!samePrice(known.held, held)) {
        known.held = held
        known.dirty = true
      }
    }
  }

  const close = (stream: Stream, how: "end" | "destroy") => {
    if (stream.closed) return
    leave(stream)
    if (how === "end") stream.sink.end()
    else stream.sink.destroy()
  }

  const leave = (stream: Stream) => {
    if (stream.closed) return
    stream.closed = true
    release(stream.bucket)
    count(-1)
    const group = stream.group
    group.streams.delete(stream)
    if (group.streams.size > 0) return
    groups.delete(group.key)
    const state = group.currency
    state.groups.delete(group)
    state.wanted = undefined
    if (state.groups.size === 0) currencies.delete(state.currency)
  }

  const write = (group: Group, bytes: Uint8Array, events: number) => {
    group.lastWriteAt = options.now()
    for (const stream of group.streams) {
      stream.sink.write(bytes)
      if (stream.sink.writableLength > options.maxBufferedBytes) {
        options.metrics?.lagging()
        close(stream, "destroy")
      }
    }
    if (events > 0) options.metrics?.events(events * group.streams.size)
  }

  const serialise = (symbol: string, s: SymbolState) => {
    s.id = ++lastId
    s.event = priceEvent(s.id, symbol, s.held!)
  }

  /**
   * Gives the changed prices their ids and bytes, then writes each group what it has not sent and may send now
   * (the spacing), in one buffer. A change held back by a group's spacing keeps its id until it goes out; one
   * whose id another event or a snapshot of the group has passed meanwhile gets a new id (and bytes), so that ids
   * keep increasing within every stream.
   */
  const flush = (state: CurrencyState) => {
    const now = options.now()
    for (const [symbol, s] of state.symbols) {
      if (!s.dirty) continue
      s.dirty = false
      serialise(symbol, s)
    }
    for (const group of state.groups) {
      let parts: Array<number> | undefined
      for (let i = 0; i < group.symbols.length; i++) {
        const s = state.symbols.get(group.symbols[i]!)
        if (s === undefined || s.id <= group.sent[i]!) continue
        // Its streams' snapshots held this price already (merged when one of them opened).
        if (group.sentHeld[i] === s.held) {
          group.sent[i] = s.id
          continue
        }
        if (now - group.sentAt[i]! < options.spacingMs) continue
        ;(parts ??= []).push(i)
      }
      if (parts === undefined) continue
      for (const i of parts) {
        const s = state.symbols.get(group.symbols[i]!)!
        if (s.id <= group.seenId) serialise(group.symbols[i]!, s)
      }
      const events = parts.map((i) => {
        const s = state.symbols.get(group.symbols[i]!)!
        group.sent[i] = s.id
        group.sentHeld[i] = s.held
        group.sentAt[i] = now
        return s
      }).sort((a, b) => a.id - b.id)
      group.seenId = events.at(-1)!.id
      write(group, events.length === 1 ? events[0]!.event! : Buffer.concat(events.map((p) => p.event!)), events.length)
    }
  }

  /** One round: each currency read once (unless its last read is still out), heartbeats where silent. */
  const round = () => {
    const now = options.now()
    for (const group of groups.values()) {
      if (now - group.lastWriteAt >= options.heartbeatMs) write(group, heartbeat, 0)
    }
    for (const state of currencies.values()) {
      if (state.reading) continue
      state.wanted ??= [...new Set([...state.groups].flatMap((g) => g.symbols))]
      state.reading = true
      options.read({ symbols: state.wanted, currency: state.currency }, (result) => {
        state.reading = false
        if (isError(result) || currencies.get(state.currency) !== state) return
        merge(state, result.prices)
        flush(state)
      })
    }
  }

  const refusalOf = (error: PriceSourceError): Refusal => {
    switch (error._tag) {
      case "UnsupportedCurrencyError":
        return { code: "validation_failed", currency: error.currency }
      case "RatesUnavailableError":
        return { code: "service_unavailable", retryAfter: Math.max(1, Math.ceil(error.retryAfterSeconds)), detail: "The price sources are temporarily unavailable." }
      case "RatesUpstreamError":
        return { code: "upstream_error" }
    }
  }

  /** Checks the limits, reads what is held, then starts the stream with its snapshot (or refuses). */
  const openStream = (request: OpenRequest, answer: OpenAnswer) => {
    if (ended) return answer.refuse({ code: "service_unavailable", retryAfter: 1, detail: "This instance is stopping; reconnect." })
    const ofAddress = perAddress.get(request.bucket) ?? 0
    if (ofAddress >= options.maxPerAddress) return answer.refuse({ code: "rate_limited", retryAfter: PER_ADDRESS_RETRY_S })
    if (reserved >= options.maxStreams) {
      return answer.refuse({ code: "service_unavailable", retryAfter: PROCESS_RETRY_S, detail: "This instance holds as many price streams as it may." })
    }
    // Reserved while the first read runs, so that a burst of openings cannot pass the limits together.
    reserved++
    perAddress.set(request.bucket, ofAddress + 1)
    options.read({ symbols: request.symbols, currency: request.currency, caller: request.caller }, (result) => {
      if (isError(result)) {
        release(request.bucket)
        return answer.refuse(refusalOf(result))
      }
      if (result.prices.size === 0 && result.unknown.length === request.symbols.length) {
        release(request.bucket)
        return answer.refuse({ code: "no_valid_symbols", unknown: result.unknown })
      }
      if (ended) {
        release(request.bucket)
        return answer.refuse({ code: "service_unavailable", retryAfter: 1, detail: "This instance is stopping; reconnect." })
      }
      const state = currencyOf(request.currency)
      merge(state, result.prices)
      const sink = answer.start()
      if (sink === undefined) {
        release(request.bucket)
        if (state.groups.size === 0) currencies.delete(state.currency)
        return
      }
      const known = request.symbols.filter((symbol) => !result.unknown.includes(symbol))
      const key = `${request.currency} ${known.join(",")}`
      let group = groups.get(key)
      if (group === undefined) {
        group = {
          key,
          currency: state,
          symbols: known,
          sent: known.map((s) => state.symbols.get(s)?.id ?? 0),
          sentHeld: known.map((s) => state.symbols.get(s)?.held),
          sentAt: known.map(() => Number.NEGATIVE_INFINITY),
          seenId: lastId,
          streams: new Set(),
          lastWriteAt: options.now()
        }
        groups.set(key, group)
        state.groups.add(group)
        state.wanted = undefined
      }
      // Its snapshot carries the latest id: what the group sends from now on must carry a higher one.
      group.seenId = lastId
      const stream: Stream = { sink, group, bucket: request.bucket, closed: false }
      group.streams.add(stream)
      count(1)
      sink.once("close", () => leave(stream))
      // What the group's streams hold; every later event of this stream gets an id above this one (ids are given at flushes).
      const held: Array<readonly [string, HeldPrice]> = []
      group.sentHeld.forEach((price, i) => price !== undefined && held.push([known[i]!, price]))
      sink.write(opening(lastId, request.currency, held, result.unknown))
    })
  }

  /** Draining (SIGTERM): every stream ends now, and none opens. */
  const endAll = () => {
    ended = true
    for (const group of [...groups.values()]) for (const stream of [...group.streams]) close(stream, "end")
  }

  return { open: openStream, round, endAll, stats: () => ({ open, groups: groups.size, currencies: currencies.size }) }
}

export type Hub = ReturnType<typeof makeHub>
