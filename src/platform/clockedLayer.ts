/** A service built from a maker that tells time by `now`, given the Clock of the context it is built in (TestClock in tests). */
import { Clock, type Context, Effect, Layer } from "effect"

export const clockedLayer = <I, S>(tag: Context.Key<I, S>, make: (now: () => number) => S): Layer.Layer<I> =>
  Layer.effect(tag, Clock.clockWith((clock) => Effect.sync(() => make(() => clock.currentTimeMillisUnsafe()))))
