/**
 * The entrypoint. WEB_CONCURRENCY (default 1) server processes: one runs here directly; more run as
 * node:cluster workers sharing the port, and then REDIS_URL is required so that limits hold across them.
 */
import cluster from "node:cluster"
import { Cause, Effect, Exit } from "effect"
import { ConfigInvalid } from "./config/ConfigInvalid.ts"
import { validateConfiguration } from "./checkConfiguration.ts"

// Every bad variable of every group at once, before any worker starts; a message, not a stack trace.
const configuration = await Effect.runPromiseExit(validateConfiguration)
if (Exit.isFailure(configuration)) {
  const failure = Cause.squash(configuration.cause)
  process.stderr.write(failure instanceof ConfigInvalid ? `${failure.message}\n` : `${Cause.pretty(configuration.cause)}\n`)
  process.exit(1)
}
const workers = configuration.value.webConcurrency

if (workers > 1 && cluster.isPrimary) {
  const { runPrimary } = await import("./cluster.ts")
  runPrimary(workers)
} else {
  const { runServer } = await import("./runServer.ts")
  runServer()
}
