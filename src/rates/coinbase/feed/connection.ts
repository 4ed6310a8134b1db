/**
 * The connection to Coinbase Exchange's public WebSocket feed (`COINBASE_WS_URL`), through Effect's
 * `Socket` over the WebSocket given (src/platform/upstreamHttp.ts: it says who we are), within
 * Coinbase's limits per address (../shared/reference/upstreams.md §1.10), run by the one instance of
 * the deployment that holds the feed (relay.ts):
 *   - opened once a pair is wanted (Coinbase closes a connection with no subscription within 5 s), it
 *     subscribes every pair wanted in one message; pairs wanted later go in one message per batch
 *     (`batchMs`), one subscribe in flight at a time. Coinbase refuses a subscribe naming one unknown
 *     product whole: the pair named is reported to the sink, and the rest asked again without it;
 *   - every tick and heartbeat read goes to the sink; a message that does not read is counted by kind
 *     (the field) and logged once per kind;
 *   - a connection that closes, fails to open (429 at the upgrade included) or says nothing for
 *     `silenceMs` is over: the sink hears of it (every pair down at once) and a new one is opened after a
 *     jittered back-off that doubles with each end in a row (`firstRetryMs` up to `maxRetryMs`), the
 *     count starting again only after a connection that lasted `stableMs`: a feed cut off as soon as
 *     connected is not asked again every second.
 */
import { Clock, Data, Duration, Effect, Queue, Random } from "effect"
import { Socket } from "effect/socket"
import { recordLiveFeedConnected, recordLiveTick, recordLiveUnreadable } from "../../../observability/metrics.ts"
import { readFeedMessage, subscribeMessage } from "./feedMessages.ts"
import type { BoardMessage } from "./quoteBoard.ts"

export interface FeedOptions {
  readonly url: string
  /** Nothing read this long: the connection is dead, open another. */
  readonly silenceMs: number
  /** A connection not open by then has failed. */
  readonly openTimeoutMs: number
  /** The back-off's first wait, doubled with each end in a row, up to `maxRetryMs` (before jitter). */
  readonly firstRetryMs: number
  readonly maxRetryMs: number
  /** A connection that lasted this long ends the row of ends: the next wait is the first again. */
  readonly stableMs: number
  /** Pairs wanted while connected are gathered this long into one subscribe message. */
  readonly batchMs: number
}

/** Where what the feed says goes: the board, and the other instances through the relay. */
export interface FeedSink {
  /** Ticks and heartbeats read at `now` (our clock), in order. */
  readonly read: (messages: ReadonlyArray<BoardMessage>, now: number) => Effect.Effect<void>
  /** The connection ended: every pair is down until heard again. */
  readonly disconnected: () => Effect.Effect<void>
  /** Coinbase refused to subscribe the pair. */
  readonly refused: (productId: string) => Effect.Effect<void>
  /** A message of ours that did not read (counted and logged here already): `kind` names its type and field. */
  readonly unreadable?: (kind: string) => Effect.Effect<void>
}

/** The pairs to subscribe: all wanted now (on connecting), and each wanted later, as it comes. */
export interface FeedPairs {
  readonly wanted: () => ReadonlyArray<string>
  readonly added: Queue.Queue<string>
}

class FeedSilent extends Data.TaggedError("FeedSilent")<{ readonly seconds: number }> {
  override get message() {
    return `nothing read for ${this.seconds} s`
  }
}

/** "BTC-FOO is not a valid product": the pair to stop asking for. */
const refusedPair = (reason: string | undefined) => /^(\S+) is not a valid product/.exec(reason ?? "")?.[1]

/** How long a subscribe may wait for Coinbase's answer before the next is sent anyway. */
const ANSWER_TIMEOUT = Duration.seconds(5)

type Answer = { readonly refused: string | undefined }

// Each kind of unreadable message is logged once per process; the metric counts every one.
const kindsLogged = new Set<string>()
const MAX_KINDS_LOGGED = 100

/** Runs the feed, reconnecting, until interrupted (relay.ts interrupts it when another instance holds the feed). */
export const runFeed = (sink: FeedSink, pairs: FeedPairs, options: FeedOptions): Effect.Effect<never, never, Socket.WebSocketConstructor> =>
  Effect.gen(function*() {
    const socket = yield* Socket.makeWebSocket(options.url, { openTimeout: Duration.millis(options.openTimeoutMs) })
    // One warning when the feed cannot be had (lost, or never connected since start): then quiet retries.
    let warned = false
    let connected = false

    const unreadable = (kind: string, detail: string) =>
      Effect.suspend(() => {
        recordLiveUnreadable(kind)
        if (kindsLogged.has(kind) || kindsLogged.size >= MAX_KINDS_LOGGED) return Effect.void
        kindsLogged.add(kind)
        return Effect.logWarning("rates: live quotes messages that do not read are dropped (logged once per kind)", { kind, detail })
      })

    /** One connection, from opening to its end (always a failure); `heard` says whether it delivered anything. */
    const session = (heard: { value: boolean }) =>
      Effect.gen(function*() {
        // Nothing to subscribe to yet: wait for a first pair, not to be closed by Coinbase for silence.
        if (pairs.wanted().length === 0) yield* Queue.take(pairs.added)
        const { pull } = yield* socket.reader
        const { write } = yield* socket.writer
        const answers = yield* Queue.unbounded<Answer>()
        const onConnection = new Set<string>()

        /** One subscribe of `ids` (those not on this connection), asked again without a pair refused. */
        const subscribe = (ids: ReadonlyArray<string>): Effect.Effect<void, Socket.SocketError> =>
          Effect.gen(function*() {
            let asking = ids.filter((id) => !onConnection.has(id))
            while (asking.length > 0) {
              yield* Queue.clear(answers)
              yield* write(subscribeMessage(asking))
              const answer = yield* Queue.take(answers).pipe(Effect.timeoutOrElse({ duration: ANSWER_TIMEOUT, orElse: () => Effect.succeed<Answer>({ refused: undefined }) }))
              const refused = answer.refused
              if (refused === undefined || !asking.includes(refused)) {
                for (const id of asking) onConnection.add(id)
                return
              }
              yield* sink.refused(refused)
              asking = asking.filter((id) => id !== refused)
            }
          })

        yield* Queue.clear(pairs.added)
        const subscriber = Effect.gen(function*() {
          yield* subscribe(pairs.wanted())
          while (true) {
            const first = yield* Queue.take(pairs.added)
            yield* Effect.sleep(Duration.millis(options.batchMs))
            const more = yield* Queue.clear(pairs.added)
            yield* subscribe([...new Set([first, ...more])])
          }
        })
        yield* Effect.forkScoped(Effect.ignore(subscriber))

        while (true) {
          const frames = yield* pull.pipe(Effect.timeoutOrElse({
            duration: Duration.millis(options.silenceMs),
            orElse: () => Effect.fail(new FeedSilent({ seconds: options.silenceMs / 1000 }))
          }))
          const now = yield* Clock.currentTimeMillis
          if (!heard.value) {
            heard.value = connected = true
            warned = false
            recordLiveFeedConnected(true)
            yield* Effect.logInfo("rates: live quotes feed connected", { url: options.url, pairs: pairs.wanted().length })
          }
          const read: Array<BoardMessage> = []
          for (const frame of frames) {
            if (typeof frame !== "string") continue
            const message = readFeedMessage(frame)
            if (message === "ignored") continue
            if ("_tag" in message) {
              yield* unreadable(message.kind, message.detail)
              if (sink.unreadable !== undefined) yield* sink.unreadable(message.kind)
            }
            else if (message.type === "ticker" || message.type === "heartbeat") {
              read.push(message)
              if (message.type === "ticker") recordLiveTick()
            } else if (message.type === "subscriptions") yield* Queue.offer(answers, { refused: undefined })
            else {
              const refused = refusedPair(message.reason)
              yield* Queue.offer(answers, { refused })
              if (refused === undefined) yield* Effect.logWarning("rates: the live quotes feed refused a request", { message: message.message, reason: message.reason })
            }
          }
          if (read.length > 0) yield* sink.read(read, now)
        }
      }).pipe(Effect.scoped)

    let endsInARow = 0
    while (true) {
      const heard = { value: false }
      const startedAt = yield* Clock.currentTimeMillis
      const ended = yield* Effect.flip(session(heard))
      yield* sink.disconnected()
      recordLiveFeedConnected(false)
      if (connected || !warned) yield* Effect.logWarning("rates: live quotes feed lost or not connected; REST tickers meanwhile, reconnecting", { reason: ended.message })
      else yield* Effect.logDebug("rates: live quotes feed not connected", { reason: ended.message })
      warned = true
      connected = false
      const lasted = (yield* Clock.currentTimeMillis) - startedAt
      endsInARow = heard.value && lasted >= options.stableMs ? 1 : endsInARow + 1
      // Equal jitter: half the wait fixed, half random, so that instances cut off together come back apart.
      const wait = Math.min(options.maxRetryMs, options.firstRetryMs * 2 ** (endsInARow - 1))
      yield* Effect.sleep(Duration.millis(wait / 2 + (yield* Random.next) * (wait / 2)))
    }
  })
