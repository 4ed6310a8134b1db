/**
 * One JSON line per request on stdout (CONTRACT C9). A service so that tests can capture the lines
 * (and prove that no secret ever reaches them) without touching process.stdout.
 */
import { Context, Effect, Layer } from "effect"

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
  /**
   * Lines are gathered and written once per event-loop turn (or at 64 KiB): one write per request
   * costs a system call each, and writes to files and terminals are synchronous in Node.
   */
  static readonly stdout = Layer.effect(
    AccessLog,
    Effect.acquireRelease(Effect.sync(() => makeBufferedWriter((text) => process.stdout.write(text))), (writer) =>
      Effect.sync(writer.flush)).pipe(Effect.map((writer) => AccessLog.of({ write: (entry) => writer.push(formatLine(entry)) })))
  )
  static readonly silent = Layer.succeed(AccessLog)({ write: () => {} })
  /** Keeps every entry in `lines`, for tests. */
  static readonly capture = (lines: Array<AccessLogEntry>) =>
    Layer.succeed(AccessLog)({ write: (entry) => void lines.push(entry) })
}

// Many lines fall in the same millisecond under load: format its timestamp once.
let isoMillis = -1
let isoText = ""
const isoNow = () => {
  const now = Date.now()
  if (now !== isoMillis) {
    isoMillis = now
    isoText = new Date(now).toISOString()
  }
  return isoText
}

/** One JSON line; the fixed members are written directly, strings always through JSON.stringify. */
export const formatLine = (e: AccessLogEntry): string => {
  const { method, path, status, durationMs, requestId, clientIp, ...rest } = e
  let line = `{"time":"${isoNow()}","level":"info","msg":"request","method":${JSON.stringify(method)},` +
    `"path":${JSON.stringify(path)},"status":${status},"durationMs":${durationMs},"requestId":"${requestId}",` +
    `"clientIp":${JSON.stringify(clientIp)}`
  for (const key in rest) line += `,${JSON.stringify(key)}:${JSON.stringify(rest[key])}`
  return `${line}}\n`
}

const makeBufferedWriter = (write: (text: string) => void) => {
  let buffer = ""
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (buffer === "") return
    const text = buffer
    buffer = ""
    write(text)
  }
  // Whatever is still buffered when the process ends is written out.
  process.once("exit", flush)
  return {
    flush,
    push: (line: string) => {
      buffer += line
      if (buffer.length >= 65_536) flush()
      else if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    }
  }
}
