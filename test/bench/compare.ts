/**
 * Two checkouts' services measured side by side in one invocation (`--compare DIR`: the scenarios,
 * compareMode.ts; `--token --compare DIR`: the token endpoint, tokenMode.ts). Both services run the
 * whole time; measured in turn, A B then B A, ..., a drift of load on a shared machine hits both alike
 * across runs, which separate invocations cannot promise. Each run's A / B is taken from its pair.
 */
import { round } from "./common.ts"

export type Side = "a" | "b"

/** Which side goes first in run `run` (A B, B A, A B, ...). */
export const sidesInTurn = (run: number): readonly [Side, Side] => (run % 2 === 0 ? ["a", "b"] : ["b", "a"])

/** The value at `q` (0..1) of the sorted values, nearest rank. */
const quantile = (values: ReadonlyArray<number>, q: number) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * q + 0.5)]!

export const median = (values: ReadonlyArray<number>) => quantile(values, 0.5)

export interface PairedRatios {
  /** Each run's A / B, in run order. */
  readonly runs: ReadonlyArray<number>
  readonly min: number
  /** First and third quartiles: where the middle half of the runs fell. */
  readonly q1: number
  readonly median: number
  readonly q3: number
  readonly max: number
}

/** A / B of `value` for each run's pair, and their spread. */
export const pairedRatios = <M>(a: ReadonlyArray<M>, b: ReadonlyArray<M>, value: (m: M) => number): PairedRatios => {
  const runs = a.map((m, i) => round(value(m) / value(b[i]!), 3))
  return { runs, min: Math.min(...runs), q1: quantile(runs, 0.25), median: median(runs), q3: quantile(runs, 0.75), max: Math.max(...runs) }
}
