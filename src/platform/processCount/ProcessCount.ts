/**
 * How many processes of this deployment share a limit (an upstream's calls a minute, its month of credits), as last
 * known: this host's workers alone (WEB_CONCURRENCY), or every process that marked itself present in the deployment's
 * Redis (redis.ts). While Redis is down each process counts its share of a limit alone (rates/redisDown.ts), so the
 * count last seen there stands: processes on several hosts then keep the deployment within the limit, not one each.
 */
import { Context, Layer } from "effect"

export interface ProcessCountShape {
  /** The processes sharing a limit, at least 1. */
  readonly current: () => number
}

/** One process alone. */
export const alone: ProcessCountShape = { current: () => 1 }

export class ProcessCount extends Context.Service<ProcessCount, ProcessCountShape>()("app/ProcessCount") {
  /** The workers of this host only (no store to learn of others from). */
  static readonly layerLocal = (workers: number): Layer.Layer<ProcessCount> =>
    Layer.succeed(ProcessCount)({ current: () => Math.max(1, workers) })
}
