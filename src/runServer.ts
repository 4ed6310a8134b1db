/**
 * Runs one server process until SIGTERM/SIGINT: in-flight requests drain, then exit 0. A start-up
 * failure is reported as a message naming what to fix, without a stack trace, and exit 1 (C9).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Exit, Layer } from "effect"
import { ConfigInvalid } from "./config/ConfigInvalid.ts"
import { LoggerLive } from "./observability/logging.ts"
import { ServerLive } from "./server.ts"

export const runServer = () =>
  NodeRuntime.runMain(Layer.launch(ServerLive().pipe(Layer.provide(LoggerLive))), {
    disableErrorReporting: true,
    teardown: (exit, onExit) => {
      // SIGTERM/SIGINT interrupt the server fiber after draining: that is a clean stop.
      if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return onExit(0)
      const failure = Cause.squash(exit.cause)
      process.stderr.write(failure instanceof ConfigInvalid ? `${failure.message}\n` : `${Cause.pretty(exit.cause)}\n`)
      onExit(1)
    }
  })
