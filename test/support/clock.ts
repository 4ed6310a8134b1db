/**
 * A Clock at a chosen instant that moves on in real time, for a service run against an emulator whose
 * clock is frozen there: both then agree on what "today" is (the closed days a series needs). A test
 * can move it on (a day later), as it moves the emulator's.
 */
import { Clock, type Duration, Effect, Layer } from "effect"

export interface MovableClock {
  readonly clock: Clock.Clock
  /** The clock, to provide to the service's layer (`Layer.provideMerge`): merged beside it, the layer's own fibers (list loads, their reloads) would keep the real clock. */
  readonly layer: Layer.Layer<never>
  readonly advance: (ms: number) => void
}

export const movableClock = (epochMs: number): MovableClock => {
  const real = Clock.Clock.defaultValue()
  let offset = epochMs - real.currentTimeMillisUnsafe()
  const millis = () => real.currentTimeMillisUnsafe() + offset
  const nanos = () => BigInt(millis()) * 1_000_000n
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: millis,
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: () => real.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: real.monotonicTimeNanos,
    sleep: (duration: Duration.Duration) => real.sleep(duration)
  }
  return {
    clock,
    layer: Layer.succeed(Clock.Clock)(clock) as Layer.Layer<never>,
    advance: (ms) => void (offset += ms)
  }
}

/** A clock starting at `epochMs`, to provide to a layer (see `layer` above). */
export const clockLayerFrom = (epochMs: number): Layer.Layer<never> => movableClock(epochMs).layer
