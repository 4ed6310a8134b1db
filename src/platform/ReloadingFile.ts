/**
 * A JSON state file that an operator CLI edits and a running server follows, without a restart:
 * decoded with a Schema (plus a `load` step for what a schema cannot check), re-checked at most once per
 * `reloadIntervalMs` by its stat signature (inode, mtime, size), written atomically (temp file + rename,
 * mode 0600) under an advisory lock. Content that does not decode never replaces the last good value:
 * it is logged once, and the file is read again only when it changes again.
 */
import * as path from "node:path"
import { Effect, Result, Schema, SchemaIssue } from "effect"
import { ensureDir, FileError, fileSignature, readOrCreate, readTextIfExists, withFileLock, writeFileAtomic } from "./files.ts"

export interface ReloadingFile<A> {
  /** Whether opening created the file (`missing: { create }`). */
  readonly created: boolean
  /** The last good value; the file is re-checked when `reloadIntervalMs` has passed. Never fails. */
  readonly get: Effect.Effect<A>
  /** The same, re-checked now (a CLI listing what it just changed). */
  readonly latest: Effect.Effect<A>
  /**
   * Read-modify-write under the file's lock, from disk, never from the cache: another process may have
   * just written. A `next` identical (`===`) to the current value writes nothing.
   */
  readonly modify: <B, E>(
    f: (current: A) => Effect.Effect<{ readonly next: A; readonly result: B }, E>
  ) => Effect.Effect<B, E | FileError>
}

export interface Options<T, A> {
  readonly file: string
  /** What the file holds (after JSON.parse). */
  readonly schema: Schema.Codec<T, unknown>
  /** The value from decoded content; fails with a reason (no secrets) for what the schema cannot check. */
  readonly load: (content: T) => Effect.Effect<A, string>
  readonly store: (value: A) => T
  /**
   * A missing file either reads as `empty` (it is written by the first `modify`), or is created with
   * `create` when opened (under the lock, so that a server and a CLI starting together agree); later
   * disappearing is then an error, and the last good value stays.
   */
  readonly missing: { readonly empty: T } | { readonly create: Effect.Effect<T> }
  readonly reloadIntervalMs: number
  /** Names the file in logs: "<label> reloaded". */
  readonly label: string
  /** Log annotations for a freshly loaded value; never secrets. */
  readonly describe?: (value: A) => Record<string, unknown>
}

interface State<A> {
  readonly value: A
  readonly signature: string | undefined
  readonly checkedAt: number
  /** The signature of content that failed: not read again until the file changes. */
  readonly rejected: string | undefined
  /** The problem last logged, so that a lasting one is logged once. */
  readonly warned: string | undefined
}

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** `clients[0].scopes: Expected …`; Schema messages do not echo input, so key material stays out of logs. */
export const issueText = (issue: SchemaIssue.Issue): string =>
  formatIssues(issue).issues.map((i) => {
    const at = (i.path ?? []).map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("").replace(/^\./, "")
    return at === "" ? i.message : `${at}: ${i.message}`
  }).join("; ")

/** Text that `make` writes: 2-space JSON with a final newline, so hand edits and diffs stay readable. */
const toText = <T>(schema: Schema.Codec<T, unknown>, value: T): Effect.Effect<string, string> =>
  Result.match(Schema.encodeResult(schema)(value), {
    onSuccess: (json) => Effect.succeed(JSON.stringify(json, null, 2) + "\n"),
    onFailure: (error) => Effect.fail(issueText(error.issue))
  })

/**
 * Opens `file`. Fails when the file cannot be read or does not decode: a broken file at start-up is
 * refused with a clear message; later it is only logged.
 */
export const make = <T, A>(options: Options<T, A>): Effect.Effect<ReloadingFile<A>, FileError> =>
  Effect.gen(function*() {
    const { file, schema, reloadIntervalMs } = options
    const fail = (reason: string) => new FileError({ path: file, reason })
    const decodeContent = Schema.decodeUnknownResult(schema)

    const parse = (text: string | undefined): Effect.Effect<A, FileError> => {
      if (text === undefined) {
        return "empty" in options.missing
          ? Effect.mapError(options.load(options.missing.empty), fail)
          : Effect.fail(fail("the file disappeared"))
      }
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        return Effect.fail(fail("not valid JSON"))
      }
      const decoded = decodeContent(json)
      return Result.isFailure(decoded)
        ? Effect.fail(fail(issueText(decoded.failure.issue)))
        : Effect.mapError(options.load(decoded.success), fail)
    }

    // Signature before content: if the file changes in between, the next check sees a new signature.
    const read = Effect.gen(function*() {
      const signature = yield* fileSignature(file)
      const text = signature === undefined ? undefined : yield* readTextIfExists(file)
      return { signature, value: yield* parse(text) }
    })

    yield* ensureDir(path.dirname(file))
    let created = false
    if ("create" in options.missing) {
      const create = options.missing.create
      created = (yield* readOrCreate(file, 0o600, () => Effect.orDie(Effect.flatMap(create, (t) => toText(schema, t))))).created
    }
    const initial = yield* read

    let state: State<A> = { ...initial, checkedAt: Date.now(), rejected: undefined, warned: undefined }

    const describe = (value: A) => options.describe?.(value) ?? {}

    /** Logs a problem once: again only when it changes (another version of the file, another error). */
    const keepLastGood = (problem: string, reason: string) =>
      Effect.suspend(() => {
        if (state.warned === problem) return Effect.succeed(state.value)
        state = { ...state, warned: problem }
        return Effect.as(
          Effect.logWarning(`${options.label} not reloaded; keeping the last good value`).pipe(
            Effect.annotateLogs({ file, reason })
          ),
          state.value
        )
      })

    const refresh: Effect.Effect<A> = Effect.gen(function*() {
      const stat = yield* Effect.result(fileSignature(file))
      if (Result.isFailure(stat)) return yield* keepLastGood(stat.failure.reason, stat.failure.reason)
      const signature = stat.success
      // A missing file has no signature; "absent" lets its disappearance be rejected once too.
      const version = signature ?? "absent"
      if (signature === state.signature || version === state.rejected) return state.value
      const text = signature === undefined ? undefined : yield* Effect.result(readTextIfExists(file))
      // An I/O error is retried at the next check (a permission fix changes no signature); bad content is not.
      if (text !== undefined && Result.isFailure(text)) return yield* keepLastGood(text.failure.reason, text.failure.reason)
      const loaded = yield* Effect.result(parse(text === undefined ? undefined : text.success))
      if (Result.isFailure(loaded)) {
        state = { ...state, rejected: version }
        return yield* keepLastGood(`${version} ${loaded.failure.reason}`, loaded.failure.reason)
      }
      state = { value: loaded.success, signature, checkedAt: state.checkedAt, rejected: undefined, warned: undefined }
      yield* Effect.logInfo(`${options.label} reloaded`).pipe(Effect.annotateLogs({ file, ...describe(loaded.success) }))
      return loaded.success
    })

    const check = (force: boolean): Effect.Effect<A> =>
      Effect.suspend(() => {
        // Wall-clock throttle (not the Effect Clock): it paces file-system checks, not token lifetimes.
        const now = Date.now()
        if (!force && now - state.checkedAt < reloadIntervalMs) return Effect.succeed(state.value)
        state = { ...state, checkedAt: now }
        return refresh
      })

    const modify: ReloadingFile<A>["modify"] = (f) =>
      withFileLock(
        file,
        Effect.gen(function*() {
          const current = yield* read
          const { next, result } = yield* f(current.value)
          let signature = current.signature
          if (next !== current.value) {
            const text = yield* Effect.mapError(toText(schema, options.store(next)), fail)
            yield* writeFileAtomic(file, text, 0o600)
            signature = yield* fileSignature(file)
          }
          state = { value: next, signature, checkedAt: Date.now(), rejected: undefined, warned: undefined }
          return result
        })
      )

    return { created, get: check(false), latest: check(true), modify }
  })

/** The same interface held in memory, for tests: no file, no reload. */
export const inMemory = <A>(initial: A): ReloadingFile<A> => {
  let value = initial
  const get = Effect.sync(() => value)
  return {
    created: false,
    get,
    latest: get,
    modify: (f) =>
      Effect.map(Effect.suspend(() => f(value)), ({ next, result }) => {
        value = next
        return result
      })
  }
}
