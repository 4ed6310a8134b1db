/**
 * The "local" provider: a durable subscriber list in `DATA_DIR/subscribers.jsonl`, for development
 * and small deployments without an e-mail provider (refused when APP_ENV=production, CONTRACT C2).
 *
 * The file is append-only, one JSON object per line. Each sign-up is a single `write(2)` of a whole
 * line on a descriptor opened with O_APPEND, so writers in several processes never interleave or
 * overwrite each other's lines (the kernel positions and writes each append atomically), and each
 * write is followed by fdatasync so an accepted sign-up survives a crash. Readers fold the lines by
 * address: the first line fixes `subscribed_at`, the latest line's locale wins.
 *
 * Two processes may both append the same new address at the same moment; the fold makes that a
 * harmless duplicate line, and both callers get 200 either way (no enumeration).
 */
import { type FileHandle, open, readFile } from "node:fs/promises"
import * as path from "node:path"
import { Clock, Effect, Layer, Result, Schema, Semaphore } from "effect"
import { Locale as LocaleSchema } from "../api/schemas.ts"
import { ConfigInvalid } from "../config/ConfigInvalid.ts"
import { makeDirectory } from "../platform/files.ts"
import { maskEmail, validateEmail } from "./email.ts"
import {
  type Locale,
  Newsletter,
  NewsletterInvalidEmail,
  NewsletterUpstreamError,
  type SubscribeInput,
  type SubscribeOutcome
} from "./Newsletter.ts"

const SUBSCRIBERS_FILE = "subscribers.jsonl"
export const subscribersPath = (dataDir: string): string => path.resolve(dataDir, SUBSCRIBERS_FILE)

export interface Subscriber {
  readonly email: string
  readonly locale: Locale
  /** ISO 8601 UTC, the first time this address signed up. */
  readonly subscribed_at: string
}

const SubscriberLine = Schema.Struct({
  email: Schema.String,
  locale: LocaleSchema,
  subscribed_at: Schema.String
})
const decodeLine = Schema.decodeUnknownOption(SubscriberLine)

const NEWLINE = 0x0a

/**
 * Folds complete lines into `index` (insertion order = first sign-up). Blank lines are skipped;
 * unreadable ones (a torn write after a crash, a hand edit) are counted and skipped, so one bad line
 * never hides the rest of the list.
 */
const foldLines = (index: Map<string, Subscriber>, text: string): number => {
  let bad = 0
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue
    let json: unknown
    try {
      json = JSON.parse(line)
    } catch {
      bad++
      continue
    }
    const decoded = decodeLine(json)
    if (decoded._tag === "None") {
      bad++
      continue
    }
    const record = decoded.value
    const known = index.get(record.email)
    index.set(record.email, known === undefined ? record : { ...known, locale: record.locale })
  }
  return bad
}

/** Reads the whole list (for the export CLI). A missing file is an empty list. */
export const readSubscribers = async (
  file: string
): Promise<{ readonly subscribers: ReadonlyArray<Subscriber>; readonly badLines: number }> => {
  let text: string
  try {
    text = await readFile(file, "utf8")
  } catch (error) {
    if (errorCode(error) === "ENOENT") return { subscribers: [], badLines: 0 }
    throw error
  }
  const index = new Map<string, Subscriber>()
  const badLines = foldLines(index, text)
  return { subscribers: [...index.values()], badLines }
}

export interface LocalOptions {
  readonly dataDir: string
}

/**
 * Opens (creating if needed) the list and returns the service. Fails with a configuration problem
 * naming DATA_DIR when the directory cannot be used (production is refused by NewsletterConfig).
 * The descriptor is closed when the layer's scope closes.
 */
const makeLocal = (options: LocalOptions) =>
  Effect.gen(function*() {
    const file = subscribersPath(options.dataDir)
    const handle = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          await makeDirectory(path.dirname(file))
          // "a+": O_APPEND for writes (every write lands at the end, atomically), pread for reads.
          const handle = await open(file, "a+", 0o600)
          try {
            await terminateLastLine(handle)
          } catch (error) {
            await handle.close()
            throw error
          }
          return handle
        },
        catch: (error) =>
          new ConfigInvalid({
            problems: [`DATA_DIR: cannot open the subscriber list ${file} (${errorCode(error) ?? String(error)})`]
          })
      }),
      (handle) => Effect.promise(() => handle.close().catch(() => undefined))
    )

    const index = new Map<string, Subscriber>()
    // Bytes of the file already folded into `index`; lines other processes append are picked up
    // from here before each decision, so "existing" reflects every writer.
    let offset = 0
    const refresh = async (): Promise<void> => {
      const { size } = await handle.stat()
      if (size < offset) {
        // Replaced or truncated by an operator: start over.
        index.clear()
        offset = 0
      }
      if (size === offset) return
      const buffer = Buffer.alloc(size - offset)
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset)
      // Only whole lines: a line another process is writing right now is picked up next time.
      const end = buffer.subarray(0, bytesRead).lastIndexOf(NEWLINE)
      if (end < 0) return
      foldLines(index, buffer.subarray(0, end + 1).toString("utf8"))
      offset += end + 1
    }
    const append = async (record: Subscriber): Promise<void> => {
      const line = Buffer.from(`${JSON.stringify(record)}\n`, "utf8")
      // One write call for the whole line; O_APPEND makes it land intact after every other line.
      const { bytesWritten } = await handle.write(line, 0, line.length)
      if (bytesWritten !== line.length) throw new Error(`short write (${bytesWritten} of ${line.length} bytes)`)
      await handle.datasync()
      // Known now, without waiting for the next refresh to read our own line back.
      const known = index.get(record.email)
      index.set(record.email, known === undefined ? record : { ...known, locale: record.locale })
    }

    yield* Effect.tryPromise({
      try: refresh,
      catch: (error) =>
        new ConfigInvalid({ problems: [`DATA_DIR: cannot read the subscriber list ${file} (${errorCode(error) ?? String(error)})`] })
    })

    // Within this process one decision at a time: read what others wrote, then append.
    const lock = yield* Semaphore.make(1)

    const subscribe = (input: SubscribeInput): Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError> =>
      Effect.gen(function*() {
        // Act like a provider: check the address ourselves rather than trust every caller.
        const checked = validateEmail(input.email)
        if (Result.isFailure(checked)) {
          return yield* Effect.fail(new NewsletterInvalidEmail({ reason: `the address ${checked.failure}` }))
        }
        const email = checked.success
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        return yield* Effect.tryPromise({
          try: async (): Promise<SubscribeOutcome> => {
            await refresh()
            const known = index.get(email)
            if (known !== undefined && known.locale === input.locale) return "existing"
            // A new address, or a known one changing its locale (the latest line's locale wins).
            await append({ email, locale: input.locale, subscribed_at: known?.subscribed_at ?? now })
            return known === undefined ? "created" : "existing"
          },
          catch: (error) =>
            new NewsletterUpstreamError({
              reason: `the local subscriber list could not be updated (${errorCode(error) ?? String(error)})`
            })
        }).pipe(
          // A started write must finish before the lock is released, even if the caller goes away.
          Effect.uninterruptible,
          lock.withPermits(1)
        )
      }).pipe(
        Effect.tapError((error) =>
          error._tag === "NewsletterInvalidEmail"
            ? Effect.logInfo("local list refused the address", error.reason)
            : Effect.logWarning("local subscribe failed", error.reason)
        ),
        Effect.annotateLogs({ provider: "local", email: maskEmail(input.email), locale: input.locale })
      )

    yield* Effect.logInfo("newsletter: local subscriber list", file, `${index.size} subscriber(s)`)
    return Newsletter.of({ provider: "local", subscribe })
  })

/** The local list as the Newsletter; its file stays open for the layer's lifetime. */
export const layerLocal = (options: LocalOptions): Layer.Layer<Newsletter, ConfigInvalid> => Layer.effect(Newsletter, makeLocal(options))

/**
 * If a crash left a torn last line, end it so the next append starts on a line of its own (the torn
 * line is then skipped by `foldLines`; no accepted sign-up was ever acknowledged for it).
 */
const terminateLastLine = async (handle: FileHandle): Promise<void> => {
  const { size } = await handle.stat()
  if (size === 0) return
  const last = Buffer.alloc(1)
  await handle.read(last, 0, 1, size - 1)
  if (last[0] !== NEWLINE) await handle.write(Buffer.from("\n"), 0, 1)
}

const errorCode = (error: unknown): string | undefined => {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined
  return typeof code === "string" ? code : undefined
}
