/**
 * Start-up failures as operators read them (C9): one line naming what to fix, no stack trace. A failure
 * this module does not know is a bug, and keeps its stack trace.
 */
import { Cause } from "effect"
import { ConfigInvalid } from "./config/ConfigInvalid.ts"
import { StartupFailure } from "./lifecycle/StartupFailure.ts"
import { FileError } from "./platform/files.ts"

/** Why the server could not listen on `host`:`port`, from the Node error behind Effect's ServeError. */
export const listenFailure = (error: { readonly cause?: unknown }, port: number, host: string | undefined) => {
  const code = (error.cause as NodeJS.ErrnoException | undefined)?.code
  const where = host ?? "every interface"
  const problem = code === "EADDRINUSE"
    ? `PORT: ${port} is already in use on ${where}; stop the process listening there or set PORT to a free port`
    : code === "EACCES"
    ? `PORT: ${port} needs privileges on ${where}; set PORT to 1024 or above`
    : code === "EADDRNOTAVAIL"
    ? `HOST: ${host} is not an address of this machine; set HOST to 0.0.0.0 (every interface), 127.0.0.1 or one of its addresses`
    : code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_NONAME"
    ? `HOST: ${host} does not resolve to an address; set HOST to an IP address of this machine, or 0.0.0.0`
    : `PORT/HOST: cannot listen on ${where} port ${port} (${code ?? String(error.cause)})`
  return new StartupFailure({ problem })
}

const dataDirAdvice = "make DATA_DIR a directory this process can write, or point it at one"

/** A failure to use DATA_DIR, whichever file met it first (keys, pepper, the subscriber list). */
const dataDirLine = (error: unknown): string | undefined =>
  error instanceof FileError
    ? `Cannot start: DATA_DIR: ${error.path}: ${error.reason}; ${dataDirAdvice}`
    : error instanceof ConfigInvalid && error.problems.length > 0 && error.problems.every((p) => p.startsWith("DATA_DIR:"))
    ? `Cannot start: ${error.problems[0]}; ${dataDirAdvice}`
    : undefined

const lineOf = (error: unknown): string | undefined =>
  error instanceof ConfigInvalid
    ? error.message
    : error instanceof StartupFailure
    ? `Cannot start: ${error.problem}`
    : undefined

/** What to print for a failed start: one line per known failure (deduplicated), else the pretty cause. */
export const startupFailureMessage = (cause: Cause.Cause<unknown>): string => {
  const lines = new Set<string>()
  let dataDirReported = false
  for (const reason of cause.reasons) {
    if (Cause.isInterruptReason(reason)) continue
    const error = Cause.isFailReason(reason) ? reason.error : Cause.isDieReason(reason) ? reason.defect : undefined
    // Files under DATA_DIR fail together, in parallel: the first says what to fix.
    const dataDir = dataDirLine(error)
    if (dataDir !== undefined) {
      if (!dataDirReported) lines.add(dataDir)
      dataDirReported = true
      continue
    }
    const line = lineOf(error)
    if (line === undefined) return Cause.pretty(cause)
    lines.add(line)
  }
  return lines.size === 0 ? Cause.pretty(cause) : [...lines].join("\n")
}
