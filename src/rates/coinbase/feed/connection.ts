/**
 * The connection to Coinbase's WebSocket feed (`COINBASE_WS_URL`, over src/platform/upstreamHttp.ts), within its
 * limits (docs/upstreams.md §4), run by the instance holding the feed (relay.ts). Opened once a
 * pair is wanted (Coinbase closes an idle one in 5 s). A subscribe naming one unknown product is refused whole:
 * that pair goes to the sink, the rest are asked again. The back-off resets only after `stableMs` connected.
 */
import { Clock, Data, Duration, Effect, Queue, Random } from "effect"
import { Socket } from "effect/socket"
import { recordLiveFeedConnected, recordLiveTick, recordLiveUnreadable } from "../../../observability/metrics.ts"
import { readFeedMessage, subscribeMessage } from "./feedMessages.ts"
import type { CoinbaseConfigShape } from "../CoinbaseConfig.ts"
import type { BoardMessage } from "./quoteBoard.ts"

/** The feed's URL and its settings, as CoinbaseConfig.ts names them. */
export type FeedOptions = { readonly url: string } & Pick<
  CoinbaseConfigShape,
  "feedSilenceMs" | "feedOpenTimeoutMs" | "feedFirstRetryMs" | "feedMaxRetryMs" | "feedStableMs" | "feedBatchMs"
>
/** Where what the feed says goes: the board, and the other instances through the relay. */
export interface FeedSink {
  /** Ticks and heartbeats read at `now` (our clock), in order. */
  readonly read: (messages: ReadonlyArray<BoardMessage>, now: number) => Effect.Effect<void>
  /** The connection ended: every pair is down until heard again. */
  readonly disconnected: () => Effect.Effect<void>
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
    const socket = yield* Socket.makeWebSocket(options.url, { openTimeout: Duration.millis(options.feedOpenTimeoutMs) })
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
            yield* Effect.sleep(Duration.millis(options.feedBatchMs))
            const more = yield* Queue.clear(pairs.added)
            yield* subscribe([...new Set([first, ...more])])
          }
        })
        yield* Effect.forkScoped(Effect.ignore(subscriber))

        while (true) {
          const frames = yield* pull.pipe(Effect.timeoutOrElse({
            duration: Duration.millis(options.feedSilenceMs),
            orElse: () => Effect.fail(new FeedSilent({ seconds: options.feedSilenceMs / 1000 }))
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
      endsInARow = heard.value && lasted >= options.feedStableMs ? 1 : endsInARow + 1
      // Equal jitter: half the wait fixed, half random, so that instances cut off together come back apart.
      const wait = Math.min(options.feedMaxRetryMs, options.feedFirstRetryMs * 2 ** (endsInARow - 1))
      yield* Effect.sleep(Duration.millis(wait / 2 + (yield* Random.next) * (wait / 2)))
    }
  })
