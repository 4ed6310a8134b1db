/**
 * A Clock at a chosen instant that moves on in real time, for a service run against an emulator whose
 * clock is frozen there: both then agree on what "today" is (the closed days a series needs).
 */
import { Clock, Duration, Effect, Layer } from "effect"

export const clockFrom = (epochMs: number): Clock.Clock => {
  const real = Clock.Clock.defaultValue()
  const offset = epochMs - real.currentTimeMillisUnsafe()
  const millis = () => real.currentTimeMillisUnsafe() + offset
  const nanos = () => BigInt(millis()) * 1_000_000n
  return {
    currentTimeMillisUnsafe: millis,
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: () => real.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: real.monotonicTimeNanos,
    sleep: (duration: Duration.Duration) => real.sleep(duration)
  }
}

/** Provides `clockFrom(epochMs)` to whatever it is merged into. */
export const clockLayerFrom = (epochMs: number): Layer.Layer<never> => Layer.succeed(Clock.Clock)(clockFrom(epochMs)) as Layer.Layer<never>
