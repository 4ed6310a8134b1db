/**
 * Small file primitives for state under DATA_DIR that a server and an operator CLI share: atomic replace
 * (temp file + rename, so a reader never sees half a file), an advisory lock file (so two processes, CLI
 * runs or instances on one volume, cannot lose each other's update), a cheap change signature for hot
 * reload, and the sweep of temp files that a crash between write and rename left behind.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Clock, Data, Effect } from "effect"

/** A state file could not be read, parsed or written. Names the file; never holds its content. */
export class FileError extends Data.TaggedError("FileError")<{
  readonly path: string
  readonly reason: string
}> {
  override get message() {
    return `${this.path}: ${this.reason}`
  }
}

const reasonOf = (cause: unknown): string => {
  const e = cause as NodeJS.ErrnoException | undefined
  // The errno code and syscall say enough; the message may repeat the path, which is already known.
  return e?.code !== undefined ? `${e.syscall ?? "fs"} failed (${e.code})` : String(e?.message ?? cause)
}

const isMissing = (e: unknown) => (e as NodeJS.ErrnoException).code === "ENOENT"

const attempt = <A>(file: string, run: () => Promise<A>): Effect.Effect<A, FileError> =>
  Effect.tryPromise({ try: run, catch: (cause) => new FileError({ path: file, reason: reasonOf(cause) }) })

/**
 * `mkdir -p`, one level at a time: Node's `{ recursive: true }` loops for ever (100% CPU, deaf to
 * SIGTERM) where mkdir answers ENOENT under an existing parent, as in /proc.
 */
export const makeDirectory = async (dir: string, mode = 0o700): Promise<void> => {
  const missing: Array<string> = []
  for (let current = path.resolve(dir);;) {
    try {
      if ((await fs.stat(current)).isDirectory()) break
      throw Object.assign(new Error(`${current} is not a directory`), { code: "ENOTDIR", syscall: "mkdir" })
    } catch (e) {
      if (!isMissing(e)) throw e
    }
    missing.push(current)
    const parent = path.dirname(current)
    if (parent === current) break
    current = parent
  }
  for (const level of missing.reverse()) {
    try {
      await fs.mkdir(level, { mode })
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    }
  }
}

export const ensureDir = (dir: string): Effect.Effect<void, FileError> => attempt(dir, () => makeDirectory(dir))

/** The file's text, or `undefined` when it does not exist. */
export const readTextIfExists = (file: string): Effect.Effect<string | undefined, FileError> =>
  attempt(file, async () => {
    try {
      return await fs.readFile(file, "utf8")
    } catch (e) {
      if (isMissing(e)) return undefined
      throw e
    }
  })

/**
 * Identifies one version of a file: inode (rename gives a new one), mtime and size. `undefined` when the
 * file does not exist.
 */
export const fileSignature = (file: string): Effect.Effect<string | undefined, FileError> =>
  attempt(file, async () => {
    try {
      const s = await fs.stat(file, { bigint: true })
      return `${s.ino}:${s.mtimeNs}:${s.size}`
    } catch (e) {
      if (isMissing(e)) return undefined
      throw e
    }
  })

/** writeFileAtomic's temp files: `<name>.<pid>.<12 hex digits>.tmp`. */
const TEMP_FILE = /^.+\.\d+\.[0-9a-f]{12}\.tmp$/

/** Replaces `file` atomically: write a temp file beside it with `mode`, fsync, rename over. */
export const writeFileAtomic = (file: string, text: string, mode: number): Effect.Effect<void, FileError> =>
  attempt(file, async () => {
    await makeDirectory(path.dirname(file))
    const tmp = `${file}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`
    const handle = await fs.open(tmp, "wx", mode)
    try {
      await handle.writeFile(text, "utf8")
      await handle.sync()
    } finally {
      await handle.close()
    }
    try {
      // The umask may have narrowed `mode`; never widened, but make it exact.
      await fs.chmod(tmp, mode)
      await fs.rename(tmp, file)
    } catch (e) {
      await fs.rm(tmp, { force: true })
      throw e
    }
  })

const LOCK_WAIT_MS = 10_000
const LOCK_STALE_MS = 30_000

/** `file`'s stat, or undefined when it does not exist (removed meanwhile). */
const statIfExists = (file: string) => fs.stat(file).catch((e) => (isMissing(e) ? undefined : Promise.reject(e)))

/**
 * Removes `lock` if it is still stale when judged again under `${lock}.break` (created with O_EXCL): of
 * several contenders that saw the same stale lock, each judges it in turn, so none removes the lock
 * another has taken since (a fresh lock is never stale). False when another is judging it now. A break
 * lock that a crash left behind is removed once it is stale itself.
 */
const breakStaleLock = async (lock: string): Promise<boolean> => {
  const guard = `${lock}.break`
  try {
    await (await fs.open(guard, "wx", 0o600)).close()
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    const seen = await statIfExists(guard)
    if (seen !== undefined && Date.now() - seen.mtimeMs > LOCK_STALE_MS) await fs.rm(guard, { force: true })
    return false
  }
  try {
    const seen = await statIfExists(lock)
    if (seen !== undefined && Date.now() - seen.mtimeMs > LOCK_STALE_MS) await fs.rm(lock, { force: true })
    return true
  } finally {
    await fs.rm(guard, { force: true })
  }
}

/**
 * Runs `effect` while holding `${file}.lock` (created with O_EXCL). A lock older than 30 s is taken to
 * be left by a crashed process and broken (breakStaleLock: by one contender at a time).
 */
export const withFileLock = <A, E, R>(
  file: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | FileError, R> => {
  const lock = `${file}.lock`
  const acquire = attempt(lock, async () => {
    await makeDirectory(path.dirname(lock))
    const deadline = Date.now() + LOCK_WAIT_MS
    for (;;) {
      try {
        const handle = await fs.open(lock, "wx", 0o600)
        await handle.writeFile(String(process.pid))
        await handle.close()
        return
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
      }
      try {
        const s = await fs.stat(lock)
        if (Date.now() - s.mtimeMs > LOCK_STALE_MS && (await breakStaleLock(lock))) continue
      } catch (e) {
        if (isMissing(e)) continue
        throw e
      }
      if (Date.now() > deadline) throw Object.assign(new Error("lock busy"), { code: "ELOCKED", syscall: "lock" })
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })
  const release = Effect.promise(() => fs.rm(lock, { force: true }).catch(() => undefined))
  return Effect.acquireUseRelease(acquire, () => effect, () => release)
}

/**
 * Returns the text of `file`, creating it first with `create()` (mode `mode`) when it does not exist.
 * Runs under the file's lock so that a server and a CLI starting together agree on one value.
 * `created` tells whether this call wrote it.
 */
export const readOrCreate = (
  file: string,
  mode: number,
  create: () => Effect.Effect<string>
): Effect.Effect<{ readonly text: string; readonly created: boolean }, FileError> =>
  Effect.flatMap(readTextIfExists(file), (existing) =>
    existing !== undefined
      ? Effect.succeed({ text: existing, created: false })
      : withFileLock(
        file,
        Effect.gen(function*() {
          const again = yield* readTextIfExists(file)
          if (again !== undefined) return { text: again, created: false }
          const text = yield* create()
          yield* writeFileAtomic(file, text, mode)
          return { text, created: true }
        })
      ))

/** Folders below the swept one looked into, at most (DATA_DIR's deepest is rates-history/<source>/<currency>/). */
const SWEEP_DEPTH = 8

/**
 * Removes writeFileAtomic's temp files (TEMP_FILE) last changed more than `olderThanMs` ago, in `dir` and
 * the folders below it: a process killed between writing one and renaming it leaves it behind, and a
 * write in progress is younger than that. Symbolic links are neither followed nor removed, so nothing
 * outside `dir` is touched. How many were removed; none when `dir` does not exist or is not a folder.
 */
export const sweepTempFiles = (dir: string, olderThanMs: number): Effect.Effect<number, FileError> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    attempt(dir, async () => {
      let removed = 0
      const visit = async (folder: string, depth: number): Promise<void> => {
        let entries
        try {
          entries = await fs.readdir(folder, { withFileTypes: true })
        } catch (e) {
          // Removed meanwhile, or DATA_DIR not (yet) a folder: whoever uses it reports that.
          if (isMissing(e) || (depth === 0 && (e as NodeJS.ErrnoException).code === "ENOTDIR")) return
          throw e
        }
        for (const entry of entries) {
          const full = path.join(folder, entry.name)
          // Dirent types are lstat's: a link to a folder or file is neither.
          if (entry.isDirectory()) {
            if (depth < SWEEP_DEPTH) await visit(full, depth + 1)
            continue
          }
          if (!entry.isFile() || !TEMP_FILE.test(entry.name)) continue
          try {
            const stat = await fs.lstat(full)
            if (!stat.isFile() || now - stat.mtimeMs <= olderThanMs) continue
            await fs.unlink(full)
            removed++
          } catch (e) {
            // Another instance starting on the same volume swept it first.
            if (!isMissing(e)) throw e
          }
        }
      }
      await visit(dir, 0)
      return removed
    }))
