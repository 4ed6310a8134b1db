/**
 * How configuration is read: Effect `Config`s evaluated against the current `ConfigProvider` (the process
 * environment unless a test swaps it), with our own messages, and `readAll`, which evaluates each entry on
 * its own and reports every failure (`Config.all` stops at the first).
 *
 * A problem line names the variable, what it accepts and what it got: `PORT: expected an integer from 0
 * to 65535, got "abc"`. Effect's schema messages say neither the variable nor the value, so each helper
 * replaces them; secrets are never quoted.
 */
import { Config, Effect, Option, Redacted, Result, Schema, SchemaIssue } from "effect"
import { ConfigInvalid } from "./ConfigInvalid.ts"

/** A Config that fails with one finished problem line. */
export const problem = (line: string): Config.Config<never> =>
  Config.fail(new Schema.SchemaError(new SchemaIssue.InvalidValue({ message: line })))

// Any failure inside a helper: `expecting` replaces it with the line naming the variable.
const rejected = problem("rejected")

/** Rejects a value unless `ok`; `expecting` turns the rejection into the variable's message. */
const ensure = <A>(ok: (a: A) => boolean) => (self: Config.Config<A>): Config.Config<A> =>
  Config.flatMap(self, (a) => (ok(a) ? Config.succeed(a) : rejected))

/**
 * Replaces any failure of `self` by `NAME: expected <expected>, got "<raw text>"` (re-read from the
 * provider). Absence stays absence, so a later `withDefault` or `required` still applies.
 */
export const expecting = (name: string, expected: string, options?: { readonly secret?: boolean }) =>
<A>(self: Config.Config<A>): Config.Config<A> =>
  Config.orElse(self, () =>
    Config.flatMap(Config.String(name), (raw) =>
      problem(`${name}: expected ${expected}, got ${options?.secret === true ? "a value (not shown: secret)" : JSON.stringify(raw)}`)))

/** Absent → a problem saying why the variable is needed. */
export const required = (name: string, why: string) => <A>(self: Config.Config<A>): Config.Config<A> =>
  Config.flatMap(Config.option(self), Option.match({ onNone: () => problem(`${name}: required ${why}`), onSome: Config.succeed }))

/** Absent → `undefined`. */
export const optional = <A>(self: Config.Config<A>): Config.Config<A | undefined> =>
  Config.withDefault(self as Config.Config<A | undefined>, undefined)

// ---- one variable ----------------------------------------------------------------------------------

/** Trimmed text; absent or blank → `fallback`. */
export const text = (name: string, fallback: string): Config.Config<string> =>
  Config.String(name).pipe(Config.map((s) => s.trim() || fallback), Config.withDefault(fallback))

/** An integer in [min, max] (absent: no default; pipe `Config.withDefault`). */
const integer = (name: string, min: number, max: number): Config.Config<number> =>
  Config.schema(Schema.Int.check(Schema.isBetween({ minimum: min, maximum: max })), name).pipe(
    expecting(name, `an integer from ${min} to ${max}`)
  )

export const int = (name: string, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): Config.Config<number> =>
  Config.withDefault(integer(name, min, max), fallback)

export const oneOf = <const L extends ReadonlyArray<string>>(name: string, values: L, fallback: L[number]) =>
  Config.Literals(values, name).pipe(expecting(name, `one of ${values.join(", ")}`), Config.withDefault(fallback))

/** A secret: kept `Redacted` (labelled with the variable) and never quoted in a message. */
export const secret = (name: string): Config.Config<Redacted.Redacted<string>> =>
  Config.map(Config.Redacted(name), (r) => Redacted.make(Redacted.value(r).trim(), { label: name }))

/** An absolute http(s) URL, without trailing slashes (absent: no default). */
export const httpUrl = (name: string): Config.Config<string> =>
  Config.URL(name).pipe(
    ensure((u) => u.protocol === "http:" || u.protocol === "https:"),
    Config.map((u) => u.href.replace(/\/+$/, "")),
    expecting(name, "an absolute http(s) URL")
  )

/** A URL with one of `schemes` (e.g. `redis:`), kept secret: it may carry a password. */
export const secretUrl = (name: string, schemes: ReadonlyArray<string>): Config.Config<Redacted.Redacted<string>> =>
  secret(name).pipe(
    ensure((r) => URL.canParse(Redacted.value(r)) && schemes.includes(new URL(Redacted.value(r)).protocol)),
    expecting(name, `a ${schemes.map((s) => `${s}//`).join(" or ")} URL`, { secret: true })
  )

/**
 * Text parsed by `parse`: a failure is reported as `NAME: expected <expected>, got "<raw>"`, followed by
 * the failure's detail in parentheses when it has one (e.g. which entry of a list is wrong).
 */
export const parsed = <A>(
  name: string,
  expected: string,
  parse: (raw: string) => Result.Result<A, string | undefined>
): Config.Config<A> =>
  Config.flatMap(Config.String(name), (raw) => {
    const result = parse(raw.trim())
    if (Result.isSuccess(result)) return Config.succeed(result.success)
    const detail = result.failure === undefined || result.failure === "" ? "" : ` (${result.failure})`
    return problem(`${name}: expected ${expected}, got ${JSON.stringify(raw)}${detail}`)
  })

/** For `parsed`: `undefined` is a failure without detail. */
export const fromOptional = <A>(value: A | undefined): Result.Result<A, undefined> =>
  value === undefined ? Result.fail(undefined) : Result.succeed(value)

// ---- variables several groups read ----------------------------------------------------------------

/** The health `environment`: free text (spec §2), e.g. `eu-canary-2`; exactly `production` is production. */
export type AppEnv = string

// Printable: no control, format (bidi, zero-width) or unassigned code points, so logs and pages stay honest.
const printableEnv = /^[^\p{C}]{1,64}$/u

export const appEnv = parsed(
  "APP_ENV",
  "printable text of 1 to 64 characters (no control characters)",
  (raw) => printableEnv.test(raw) ? Result.succeed(raw) : Result.fail(undefined)
).pipe(Config.withDefault("development"))
/** For a cross-field rule of another group: an invalid APP_ENV is reported by AppConfig, not twice. */
export const isProduction: Effect.Effect<boolean> = Effect.map(Effect.option(appEnv), (e) => Option.getOrUndefined(e) === "production")

export const dataDir = text("DATA_DIR", "./data")

// ---- every problem at once --------------------------------------------------------------------------

export type Reading<A> = Effect.Effect<A, Config.ConfigError | ConfigInvalid>

const linesOf = (error: Config.ConfigError | ConfigInvalid): ReadonlyArray<string> => {
  if (error._tag === "ConfigInvalid") return error.problems
  const cause = error.cause
  if (cause._tag === "SchemaError" && cause.issue._tag === "InvalidValue" && cause.issue.annotations?.message) {
    return [cause.issue.annotations.message]
  }
  // A Config read without our helpers: Effect's own message, on one line.
  return [error.message.replace(/\s*\n\s*/g, " ")]
}

/** Evaluates every entry, each on its own; fails with all their problems (duplicates once). */
export const readAll = <const S extends Record<string, Reading<any>>>(
  readings: S
): Effect.Effect<{ -readonly [K in keyof S]: Effect.Success<S[K]> }, ConfigInvalid> =>
  Effect.gen(function*() {
    const values: Record<string, unknown> = {}
    const problems: Array<string> = []
    for (const [key, reading] of Object.entries(readings)) {
      const result = yield* Effect.result(reading)
      if (Result.isSuccess(result)) values[key] = result.success
      else problems.push(...linesOf(result.failure))
    }
    if (problems.length > 0) return yield* new ConfigInvalid({ problems: [...new Set(problems)] })
    return values as { -readonly [K in keyof S]: Effect.Success<S[K]> }
  })

/** Cross-field rules over values already read: each returns the problem lines it finds. */
export const checked = <A>(reading: Effect.Effect<A, ConfigInvalid>, rule: (a: A) => ReadonlyArray<string>) =>
  Effect.flatMap(reading, (a) => {
    const problems = rule(a)
    return problems.length > 0 ? Effect.fail(new ConfigInvalid({ problems })) : Effect.succeed(a)
  })
