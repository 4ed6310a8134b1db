/**
 * One connection per instance to Coinbase Exchange's public WebSocket feed (`COINBASE_WS_URL`), through
 * Effect's `Socket` over the runtime's WebSocket: opened once the board follows a pair (Coinbase closes a
 * connection with no subscription within 5 s), subscribed to `ticker` and `heartbeat` one pair a message
 * (a pair Coinbase refuses fails its own message only, and is dropped from the board), then read into
 * the board (quoteBoard.ts). Pairs followed later are subscribed on the open connection.
 *
 * A connection that closes, fails to open, or says nothing for `silenceMs` (heartbeats come every second)
 * is over: every pair is down at once (liveQuotes.ts asks the REST tickers meanwhile) and a new one is
 * opened, after `firstRetryMs` when the last was heard from, else backing off, doubling up to
 * `maxRetryMs`, jittered (±20 %), so that instances do not come back in step.
 */
import { Clock, Data, Duration, Effect, Queue, Schedule, type Scope } from "effect"
import { Socket } from "effect/socket"
import { recordLiveFeedConnected, recordLiveTick } from "../../../observability/metrics.ts"
import { readFeedMessage, subscribeMessage } from "./feedMessages.ts"
import type { QuoteBoard } from "./quoteBoard.ts"

export interface FeedOptions {
  readonly url: string
  /** Nothing read this long: the connection is dead, open another. */
  readonly silenceMs: number
  /** A connection not open by then has failed. */
  readonly openTimeoutMs: number
  /** Wait before reopening after a connection that was heard from; the back-off's first step. */
  readonly firstRetryMs: number
  /** The back-off's longest wait (before jitter). */
  readonly maxRetryMs: number
}

export interface FeedLink {
  /** Subscribes to pairs the board now follows: at once when connected, else when the next connection opens. */
  readonly subscribe: (productIds: ReadonlyArray<string>) => void
}

class FeedSilent extends Data.TaggedError("FeedSilent")<{ readonly seconds: number }> {
  override get message() {
    return `nothing read for ${this.seconds} s`
  }
}

/** "BTC-FOO is not a valid product": the pair to stop following. */
const refusedPair = (reason: string | undefined) => /^(\S+) is not a valid product/.exec(reason ?? "")?.[1]

/** Runs the feed in the scope's background for as long as the scope lasts. */
export const runFeed = (board: QuoteBoard, options: FeedOptions): Effect.Effect<FeedLink, never, Scope.Scope | Socket.WebSocketConstructor> =>
  Effect.gen(function*() {
    const pending = yield* Queue.unbounded<string>()
    const socket = yield* Socket.makeWebSocket(options.url, { openTimeout: Duration.millis(options.openTimeoutMs) })
    let connected = false
    // One warning when the feed cannot be had (lost, or never connected since start): then quiet retries.
    let warned = false

    const handle = (frame: string | Uint8Array, now: number) =>
      Effect.suspend(() => {
        if (typeof frame !== "string") return Effect.void
        const message = readFeedMessage(frame)
        if (message === "ignored") return Effect.void
        if (message === "unreadable") return Effect.logDebug("rates: a live quotes message that does not read, dropped")
        if (message.type === "ticker" || message.type === "heartbeat") {
          if (board.read(message, now) && message.type === "ticker") recordLiveTick()
          return Effect.void
        }
        if (message.type === "subscriptions") return Effect.void
        const pair = refusedPair(message.reason)
        if (pair !== undefined) board.drop(pair)
        return Effect.logWarning("rates: the live quotes feed refused a request", { message: message.message, reason: message.reason })
      })

    /** One connection, from opening to its end (always a failure); `heard` says whether it delivered anything. */
    const session = (heard: { value: boolean }) =>
      Effect.gen(function*() {
        // Nothing to subscribe to yet: wait for the first pair, not to be closed by Coinbase for silence.
        if (board.followed().length === 0) yield* Queue.take(pending)
        const { pull } = yield* socket.reader
        const { write } = yield* socket.writer
        yield* Queue.clear(pending)
        for (const id of board.followed()) yield* write(subscribeMessage([id]))
        yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(pending), (id) => write(subscribeMessage([id])))))
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
            yield* Effect.logInfo("rates: live quotes feed connected", { url: options.url, pairs: board.followed().length })
          }
          for (const frame of frames) yield* handle(frame, now)
        }
      }).pipe(Effect.scoped)

    /** A session, and what its end means: one that was heard from ends well (start again soon), else it failed. */
    const attempt = Effect.suspend(() => {
      const heard = { value: false }
      return session(heard).pipe(
        Effect.catch((error) =>
          Effect.gen(function*() {
            board.disconnected()
            recordLiveFeedConnected(false)
            const reason = error.message
            if (connected || !warned) yield* Effect.logWarning("rates: live quotes feed lost or not connected; REST tickers meanwhile, reconnecting", { reason })
            else yield* Effect.logDebug("rates: live quotes feed not connected", { reason })
            warned = true
            connected = false
            if (!heard.value) return yield* Effect.fail(error)
          })
        )
      )
    })

    const backoff = Schedule.min([Schedule.exponential(Duration.millis(options.firstRetryMs)), Schedule.spaced(Duration.millis(options.maxRetryMs))]).pipe(Schedule.jittered)
    yield* attempt.pipe(
      Effect.retry(backoff),
      Effect.andThen(Effect.sleep(Duration.millis(options.firstRetryMs))),
      Effect.forever,
      Effect.forkScoped
    )

    return {
      subscribe: (productIds) => {
        for (const id of productIds) Queue.offerUnsafe(pending, id)
      }
    }
  })
