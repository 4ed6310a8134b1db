/**
 * The entrypoint. WEB_CONCURRENCY (default 1) server processes: one runs here directly; more run as
 * node:cluster workers sharing the port, and then REDIS_URL is required so that limits hold across them.
 */
import cluster from "node:cluster"
import { EnvReader } from "./env.ts"

const env = new EnvReader(process.env)
const workers = env.int("WEB_CONCURRENCY", 1, 1, 64)
if (workers > 1 && env.raw("REDIS_URL") === undefined) {
  env.problems.push("WEB_CONCURRENCY: more than one worker needs REDIS_URL, so that rate limits and the rates cache are shared")
}
if (env.problems.length > 0) {
  process.stderr.write(`Invalid configuration:\n${env.problems.map((p) => `  - ${p}`).join("\n")}\n`)
  process.exit(1)
}

if (workers > 1 && cluster.isPrimary) {
  const { runPrimary } = await import("./cluster.ts")
  runPrimary(workers)
} else {
  await import("./server.ts")
}
