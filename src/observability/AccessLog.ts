/**
 * One JSON line per request on stdout (CONTRACT C9). A service so that tests can capture the lines
 * (and prove that no secret ever reaches them) without touching process.stdout.
 */
import { Context, Effect, Layer } from "effect"
import { stdoutLines } from "./logging.ts"

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
  /** Lines go to the process's one stdout writer (logging.ts), flushed when the layer closes. */
  static readonly stdout = Layer.effect(
    AccessLog,
    Effect.acquireRelease(Effect.sync(stdoutLines), (writer) => Effect.sync(writer.flush)).pipe(
      Effect.map((writer) => AccessLog.of({ write: (entry) => writer.push(formatLine(entry)) }))
    )
  )
  static readonly silent = Layer.succeed(AccessLog)({ write: () => {} })
  /** Keeps every entry in `lines`, for tests. */
  static readonly capture = (lines: Array<AccessLogEntry>) =>
    Layer.succeed(AccessLog)({ write: (entry) => void lines.push(entry) })
}

// Many lines fall in the same millisecond under load: its timestamp is made once, from the second's
// text (toISOString once a second) and the milliseconds.
let isoMillis = -1
let isoText = ""
let isoSecond = -1
let isoSecondText = ""
const isoNow = () => {
  const now = Date.now()
  if (now !== isoMillis) {
    isoMillis = now
    const ms = now % 1000
    if (now - ms !== isoSecond) {
      isoSecond = now - ms
      isoSecondText = new Date(isoSecond).toISOString().slice(0, 20)
    }
    isoText = `${isoSecondText}${ms < 10 ? "00" : ms < 100 ? "0" : ""}${ms}Z`
  }
  return isoText
}

/** One JSON line of the shape of logging.ts; fixed members written directly, strings always through JSON.stringify. */
const formatLine = (e: AccessLogEntry): string => {
  const { method, path, status, durationMs, requestId, clientIp, ...rest } = e
  let line = `{"time":"${isoNow()}","level":"info","msg":"request","method":${JSON.stringify(method)},` +
    `"path":${JSON.stringify(path)},"status":${status},"durationMs":${durationMs},"requestId":"${requestId}",` +
    `"clientIp":${JSON.stringify(clientIp)}`
  for (const key in rest) line += `,${JSON.stringify(key)}:${JSON.stringify(rest[key])}`
  return `${line}}\n`
}
