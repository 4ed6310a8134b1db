/**
 * Runs one server process until SIGTERM/SIGINT: in-flight requests drain, then exit 0. A start-up
 * failure is reported as a message naming what to fix, without a stack trace, and exit 1; a start-up
 * that has not listened within a minute is one too (C9: nothing at start-up waits for ever).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Layer } from "effect"
import { LoggerLive } from "./observability/logging.ts"
import { ServerLive } from "./server.ts"
import { startupFailureMessage } from "./startup.ts"

const startupDeadlineMs = 60_000

export const runServer = () => {
  const deadline = setTimeout(() => {
    process.stderr.write(
      `Cannot start: not listening after ${startupDeadlineMs / 1000} s (a file under DATA_DIR, a dependency or the network hangs); see the log above\n`
    )
    process.exit(1)
  }, startupDeadlineMs)
  // Built once the server listens.
  const server = ServerLive().pipe(Layer.tap(() => Effect.sync(() => clearTimeout(deadline))))
  NodeRuntime.runMain(Layer.launch(server.pipe(Layer.provide(LoggerLive))), {
    disableErrorReporting: true,
    teardown: (exit, onExit) => {
      clearTimeout(deadline)
      // SIGTERM/SIGINT interrupt the server fiber after draining: that is a clean stop.
      if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return onExit(0)
      process.stderr.write(`${startupFailureMessage(exit.cause)}\n`)
      onExit(1)
    }
  })
}
