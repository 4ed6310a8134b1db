/**
 * One JSON line per request on stdout (CONTRACT C9). A service so that tests can capture the lines
 * (and prove that no secret ever reaches them) without touching process.stdout.
 */
import { Context, Layer } from "effect"

export interface AccessLogEntry {
  readonly method: string
  readonly path: string
  readonly status: number
  readonly durationMs: number
  readonly requestId: string
  readonly clientIp: string
  readonly [field: string]: unknown
}

export class AccessLog extends Context.Service<AccessLog, {
  readonly write: (entry: AccessLogEntry) => void
}>()("app/AccessLog") {
  static readonly stdout = Layer.succeed(AccessLog)({
    write: (entry) => {
      process.stdout.write(
        JSON.stringify({ time: new Date().toISOString(), level: "info", msg: "request", ...entry }) + "\n"
      )
    }
  })
  static readonly silent = Layer.succeed(AccessLog)({ write: () => {} })
  /** Keeps every entry in `lines`, for tests. */
  static readonly capture = (lines: Array<AccessLogEntry>) =>
    Layer.succeed(AccessLog)({ write: (entry) => void lines.push(entry) })
}
