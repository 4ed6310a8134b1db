/**
 * Reading configuration from environment variables. Every reader records a problem instead of
 * throwing, so start-up can report every bad variable at once, each by name (CONTRACT C2).
 */
import { Data, Effect, Redacted } from "effect"

export type Env = Readonly<Record<string, string | undefined>>

export class ConfigInvalid extends Data.TaggedError("ConfigInvalid")<{ readonly problems: ReadonlyArray<string> }> {
  override get message() {
    return `Invalid configuration:\n${this.problems.map((p) => `  - ${p}`).join("\n")}`
  }
}

export class EnvReader {
  readonly problems: Array<string> = []
  readonly env: Env
  constructor(env: Env) {
    this.env = env
  }

  raw(name: string): string | undefined {
    const value = this.env[name]
    return value === undefined || value.trim() === "" ? undefined : value.trim()
  }
  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback
  }
  optional(name: string): string | undefined {
    return this.raw(name)
  }
  secret(name: string): Redacted.Redacted<string> | undefined {
    const value = this.raw(name)
    return value === undefined ? undefined : Redacted.make(value, { label: name })
  }
  int(name: string, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): number {
    const value = this.raw(name)
    if (value === undefined) return fallback
    const n = Number(value)
    if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
      this.problems.push(`${name}: expected an integer from ${min} to ${max}, got "${value}"`)
      return fallback
    }
    return n
  }
  bool(name: string, fallback: boolean): boolean {
    const value = this.raw(name)?.toLowerCase()
    if (value === undefined) return fallback
    if (["true", "1", "yes", "on"].includes(value)) return true
    if (["false", "0", "no", "off"].includes(value)) return false
    this.problems.push(`${name}: expected true or false, got "${value}"`)
    return fallback
  }
  oneOf<const A extends string>(name: string, values: ReadonlyArray<A>, fallback: A): A {
    const value = this.raw(name)
    if (value === undefined) return fallback
    if ((values as ReadonlyArray<string>).includes(value)) return value as A
    this.problems.push(`${name}: expected one of ${values.join(", ")}, got "${value}"`)
    return fallback
  }
  url(name: string, fallback: string): string {
    const value = this.raw(name) ?? fallback
    if (!URL.canParse(value) || !/^https?:$/.test(new URL(value).protocol)) {
      this.problems.push(`${name}: expected an absolute http(s) URL, got "${value}"`)
      return fallback
    }
    return value.replace(/\/+$/, "")
  }
  /** `a:1,b:2` → Map; each key must be one of `keys` when given. */
  pairs(name: string, keys?: ReadonlyArray<string>): Map<string, string> {
    const out = new Map<string, string>()
    const value = this.raw(name)
    if (value === undefined) return out
    for (const part of value.split(",")) {
      const i = part.indexOf(":")
      const k = part.slice(0, i).trim()
      const v = part.slice(i + 1).trim()
      if (i <= 0 || v === "" || (keys !== undefined && !keys.includes(k))) {
        this.problems.push(`${name}: expected "key:value" pairs separated by commas, bad entry "${part.trim()}"`)
        continue
      }
      out.set(k, v)
    }
    return out
  }
  require(name: string, why: string): void {
    if (this.raw(name) === undefined) this.problems.push(`${name}: required ${why}`)
  }
  /** Fails with every recorded problem, or succeeds with `value`. */
  done<A>(value: A): Effect.Effect<A, ConfigInvalid> {
    return this.problems.length > 0 ? Effect.fail(new ConfigInvalid({ problems: this.problems })) : Effect.succeed(value)
  }
}
