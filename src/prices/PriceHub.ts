/**
 * The process's one price hub (hub.ts) as a service: its limits from the configuration (LIVE_STREAMS_PER_ADDRESS,
 * LIVE_STREAMS_MAX), its rounds on a timer for as long as the server runs, its reads through the PriceSource port.
 */
import { Context, Effect, Exit, Layer } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { recordLiveStreamEvents, recordLiveStreamLagging, recordLiveStreamsOpen, recordLiveStreamsStarted } from "../observability/metrics.ts"
import { type Hub, type HubOptions, makeHub } from "./hub.ts"
import { PriceSource } from "./PriceSource.ts"

/**
 * Production rounds, spacing and heartbeats (C10): at most 4 events a second per symbol, a change going out within
 * a round (50 ms) once the spacing allows; a comment after 15 s of silence.
 */
const ROUND_MS = 50
const SPACING_MS = 250
const HEARTBEAT_MS = 15_000
/** Unread bytes past which a stream is closed for lagging: some seconds of a busy stream's events. */
const MAX_BUFFERED_BYTES = 64 * 1024

/** What a test may shorten (production: the constants above). */
export type PriceHubTiming = Partial<Pick<HubOptions, "roundMs" | "spacingMs" | "heartbeatMs" | "maxBufferedBytes">>

export class PriceHub extends Context.Service<PriceHub, Hub>()("app/prices/PriceHub") {
  /** With the rounds and bounds given (tests: small intervals). */
  static readonly layerWith = (timing: PriceHubTiming) =>
    Layer.effect(
      PriceHub,
      Effect.gen(function*() {
        const config = yield* AppConfig
        const source = yield* PriceSource
        const run = Effect.runCallbackWith(yield* Effect.context<never>())
        const hub = makeHub({
          roundMs: timing.roundMs ?? ROUND_MS,
          // A test that shortens the rounds without a spacing gets one event per round.
          spacingMs: timing.spacingMs ?? (timing.roundMs ?? SPACING_MS),
          heartbeatMs: timing.heartbeatMs ?? HEARTBEAT_MS,
          maxBufferedBytes: timing.maxBufferedBytes ?? MAX_BUFFERED_BYTES,
          maxPerAddress: config.liveStreams.perAddress,
          maxStreams: config.liveStreams.max,
          now: Date.now,
          read: (query, done) =>
            void run(source.latest(query), {
              onExit: (exit) => done(Exit.isSuccess(exit) ? exit.value : Exit.findErrorOption(exit).pipe((found) =>
                found._tag === "Some" ? found.value : { _tag: "RatesUpstreamError" as const }))
            }),
          metrics: { open: recordLiveStreamsOpen, events: recordLiveStreamEvents, lagging: recordLiveStreamLagging }
        })
        recordLiveStreamsStarted()
        const roundMs = timing.roundMs ?? ROUND_MS
        yield* Effect.acquireRelease(
          Effect.sync(() => setInterval(hub.round, roundMs)),
          (timer) => Effect.sync(() => {
            clearInterval(timer)
            hub.endAll()
          })
        )
        return hub
      })
    )

  static readonly layer = PriceHub.layerWith({})
}
