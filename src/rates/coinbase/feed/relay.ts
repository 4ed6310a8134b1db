/**
 * One feed connection for the deployment (CONTRACT C4 "Live quotes"): Coinbase limits connections per address.
 * The holder of the role "live-quotes" (src/platform/leadership/) runs connection.ts and publishes what it reads;
 * the others read it into their boards and tell it their pairs every `announceMs` (a new holder learns them).
 */
import { Clock, Duration, Effect, Queue, Schema, type Scope } from "effect"
import type { Socket } from "effect/socket"
import { Leadership } from "../../../platform/leadership/Leadership.ts"
import { recordLiveFeedHolder } from "../../../observability/metrics.ts"
import type { CoinbaseConfigShape } from "../CoinbaseConfig.ts"
import { type FeedOptions, type FeedSink, runFeed } from "./connection.ts"
import type { BoardMessage, QuoteBoard } from "./quoteBoard.ts"

const ROLE = "live-quotes"
const QUOTES = "live-quotes:read"
const WANTS = "live-quotes:wanted"
/** What the holder publishes: the messages it read, the connection's end, a pair refused. */
const RelayEvent = Schema.Union([
  Schema.Struct({ type: Schema.Literal("ticker"), product_id: Schema.String, price: Schema.Finite, open_24h: Schema.Finite, time: Schema.Finite, trade_id: Schema.Int }),
  Schema.Struct({ type: Schema.Literal("heartbeat"), product_id: Schema.String, last_trade_id: Schema.Int, time: Schema.Finite }),
  Schema.Struct({ type: Schema.Literal("down") }),
  Schema.Struct({ type: Schema.Literal("refused"), product_id: Schema.String })
])
type RelayEvent = typeof RelayEvent.Type
const decodeEvents = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Array(RelayEvent)))
const decodeWanted = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Array(Schema.String)))
/** The feed's options, and how often an instance that does not hold it announces its pairs. */
export type LiveFeedOptions = FeedOptions & Pick<CoinbaseConfigShape, "feedAnnounceMs">
export interface LiveFeed {
  /** Follows pairs (those Coinbase refused excepted): subscribed by whichever instance holds the feed. */
  readonly follow: (productIds: ReadonlyArray<string>) => Effect.Effect<void>
  /** Coinbase's product list was reloaded: pairs it refused may be asked again. */
  readonly forgetRefusals: () => void
}
/** Runs this instance's part of the deployment's feed, for as long as the scope lasts. */
export const runLiveFeed = (
  board: QuoteBoard,
  options: LiveFeedOptions
): Effect.Effect<LiveFeed, never, Scope.Scope | Leadership | Socket.WebSocketConstructor> =>
  Effect.gen(function*() {
    const leadership = yield* Leadership
    const refused = new Set<string>()
    const added = yield* Queue.unbounded<string>()
    let holding = false

    const publish = (events: ReadonlyArray<RelayEvent>) => leadership.publish(QUOTES, JSON.stringify(events))
    const drop = (productId: string) => {
      refused.add(productId)
      board.drop(productId)
    }

    const sink: FeedSink = {
      read: (messages, now) => {
        for (const message of messages) board.read(message, now)
        return publish(messages)
      },
      disconnected: () => {
        board.disconnected()
        return publish([{ type: "down" }])
      },
      refused: (productId) => {
        drop(productId)
        return Effect.andThen(Effect.logWarning("rates: Coinbase refused a pair on the live quotes feed; not asked again until its product list is reloaded", { pair: productId }), publish([{ type: "refused", product_id: productId }]))
      }
    }
    /** Pairs new to the board, to subscribe (here, or by the holder). */
    const followHere = (productIds: ReadonlyArray<string>) => board.follow(productIds.filter((id) => !refused.has(id)))
    /** The holder: the connection, and the pairs the readers follow. */
    const lead = Effect.gen(function*() {
      holding = true
      recordLiveFeedHolder(true)
      const wanted = yield* leadership.listen(WANTS)
      yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(wanted), (text) => {
        const ids = decodeWanted(text)
        return ids._tag === "Some" ? Queue.offerAll(added, followHere(ids.value)) : Effect.void
      })).pipe(Effect.ignore))
      return yield* runFeed(sink, { wanted: () => board.followed(), added }, options)
    }).pipe(Effect.scoped, Effect.ensuring(Effect.sync(() => (holding = false))))
    /** A reader: the holder's quotes into the board, and what this instance follows to the holder. */
    const follow = Effect.gen(function*() {
      recordLiveFeedHolder(false)
      board.disconnected()
      const quotes = yield* leadership.listen(QUOTES)
      const announce = Effect.suspend(() => leadership.publish(WANTS, JSON.stringify(board.followed())))
      yield* Effect.forkScoped(announce.pipe(Effect.andThen(Effect.sleep(Duration.millis(options.feedAnnounceMs))), Effect.forever))
      yield* Effect.forever(Effect.gen(function*() {
        const events = decodeEvents(yield* Queue.take(quotes))
        if (events._tag === "None") return
        const now = yield* Clock.currentTimeMillis
        for (const event of events.value) {
          if (event.type === "down") board.disconnected()
          else if (event.type === "refused") drop(event.product_id)
          else board.read(event as BoardMessage, now)
        }
      }))
    }).pipe(Effect.scoped, Effect.ignore, Effect.ensuring(Effect.sync(() => board.disconnected())))

    yield* leadership.run(ROLE, { lead, follow })

    return {
      follow: (productIds) =>
        Effect.suspend(() => {
          const fresh = followHere(productIds)
          if (fresh.length === 0) return Effect.void
          return holding ? Queue.offerAll(added, fresh).pipe(Effect.asVoid) : leadership.publish(WANTS, JSON.stringify(fresh))
        }),
      forgetRefusals: () => refused.clear()
    }
  })
