/**
 * Logging: every line on stdout has one JSON shape (C9): `time`, `level`, `msg`, then the fields
 * (a request's, or a log call's annotations). The access log (AccessLog.ts) writes the same shape.
 */
import { Cause, Logger, References } from "effect"

const levelOf = (label: string) => label.toLowerCase()

/** Effect's log calls, as JSON lines of the access log's shape. */
const jsonLogger = Logger.make<unknown, void>(({ cause, date, fiber, logLevel, message }) => {
  const messages = Array.isArray(message) ? message : [message]
  const [first, ...rest] = messages
  const fields: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(fiber.getRef(References.CurrentLogAnnotations))) fields[key] = value
  if (rest.length > 0) fields.details = rest.map(String)
  if (cause.reasons.length > 0) fields.cause = Cause.pretty(cause)
  stdoutLines().push(jsonLine(date.toISOString(), levelOf(logLevel), String(first), fields))
})

/** `{"time","level","msg",...fields}` and a newline. */
const jsonLine = (time: string, level: string, msg: string, fields: Record<string, unknown>) => {
  let line = `{"time":"${time}","level":${JSON.stringify(level)},"msg":${JSON.stringify(msg)}`
  for (const key in fields) line += `,${JSON.stringify(key)}:${JSON.stringify(fields[key])}`
  return `${line}}\n`
}

let stdout: ReturnType<typeof makeBufferedWriter> | undefined
/** The one writer of stdout lines, made on first use: lines are gathered and written once per event-loop turn. */
export const stdoutLines = () => (stdout ??= makeBufferedWriter((text) => process.stdout.write(text)))

/**
 * Lines are gathered and written once per event-loop turn (or at 64 KiB): one write per request
 * costs a system call each, and writes to files and terminals are synchronous in Node.
 */
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

export const LoggerLive = Logger.layer([jsonLogger])
