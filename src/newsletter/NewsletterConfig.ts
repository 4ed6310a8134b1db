/**
 * Newsletter configuration (CONTRACT C2), read with the shared `EnvReader` so that start-up reports
 * every bad variable at once, each by name. Only the selected provider's variables are required.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import validator from "validator"
import { type ConfigInvalid, type Env, EnvReader } from "../env.ts"
import { type Locale, Locales } from "./Newsletter.ts"

export const NewsletterProviders = ["brevo", "listmonk", "local"] as const
export type NewsletterProviderName = (typeof NewsletterProviders)[number]

export interface BrevoSettings {
  /** No trailing slash, e.g. https://api.brevo.com/v3 */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
  readonly listIds: ReadonlyArray<number>
  /** One double-opt-in template per locale: the template's content sets the e-mail's language. */
  readonly templates: Readonly<Record<Locale, number>>
  readonly redirectUrl: string
}

export interface ListmonkSettings {
  /** No trailing slash. */
  readonly url: string
  /** The public subscription endpoint takes no attributes, so each locale is its own list. */
  readonly lists: Readonly<Record<Locale, string>>
}

/** Time bounds for one provider call (CONTRACT C5: a provider failure is a prompt 502, never a hang). */
export interface CallPolicy {
  /** Limit for one attempt: connect, send, status and whole body. */
  readonly attemptTimeoutMs: number
  /** Limit for the whole call including retries and back-off. */
  readonly deadlineMs: number
  /** Extra attempts after a transient failure (timeout, reset, 5xx); the calls are idempotent. */
  readonly retries: number
}

interface Common {
  readonly appEnv: string
  readonly isProduction: boolean
  readonly dataDir: string
  readonly call: CallPolicy
}

export type NewsletterConfigShape =
  | (Common & { readonly provider: "brevo"; readonly brevo: BrevoSettings })
  | (Common & { readonly provider: "listmonk"; readonly listmonk: ListmonkSettings })
  | (Common & { readonly provider: "local" })

export const readNewsletterConfig = (env: Env): Effect.Effect<NewsletterConfigShape, ConfigInvalid> => {
  const r = new EnvReader(env)
  const appEnv = r.string("APP_ENV", "development")
  const isProduction = appEnv === "production"
  const provider = r.oneOf("NEWSLETTER_PROVIDER", NewsletterProviders, "local")
  const attemptTimeoutMs = r.int("NEWSLETTER_TIMEOUT_MS", 5_000, 10, 60_000)
  const deadlineMs = r.int("NEWSLETTER_DEADLINE_MS", 8_000, 10, 120_000)
  if (deadlineMs < attemptTimeoutMs) {
    r.problems.push(
      `NEWSLETTER_DEADLINE_MS: must be at least NEWSLETTER_TIMEOUT_MS (${attemptTimeoutMs}), got ${deadlineMs}`
    )
  }
  const common: Common = {
    appEnv,
    isProduction,
    dataDir: r.string("DATA_DIR", "./data"),
    call: { attemptTimeoutMs, deadlineMs, retries: r.int("NEWSLETTER_RETRIES", 2, 0, 5) }
  }
  switch (provider) {
    case "brevo":
      return r.done({ ...common, provider, brevo: readBrevo(r) })
    case "listmonk":
      return r.done({ ...common, provider, listmonk: readListmonk(r) })
    case "local": {
      if (isProduction) {
        r.problems.push(
          `NEWSLETTER_PROVIDER: "local" ${r.raw("NEWSLETTER_PROVIDER") === undefined ? "(the default) " : ""}` +
            `keeps subscribers in a file and is refused when APP_ENV=production; set it to brevo or listmonk`
        )
      }
      return r.done({ ...common, provider })
    }
  }
}

const readBrevo = (r: EnvReader): BrevoSettings => {
  const why = "when NEWSLETTER_PROVIDER=brevo"
  r.require("BREVO_API_KEY", why)
  r.require("BREVO_LIST_IDS", why)
  r.require("BREVO_DOI_TEMPLATES", why)
  r.require("BREVO_DOI_REDIRECT_URL", why)
  const listIds: Array<number> = []
  for (const part of (r.raw("BREVO_LIST_IDS")?.split(",") ?? []).map((p) => p.trim())) {
    const id = positiveInt(part)
    if (id === undefined) r.problems.push(`BREVO_LIST_IDS: expected comma-separated positive integers, bad entry "${part}"`)
    else if (!listIds.includes(id)) listIds.push(id)
  }
  const templates = perLocale(r, "BREVO_DOI_TEMPLATES", "a positive template id", positiveInt, 0)
  return {
    baseUrl: r.url("BREVO_BASE_URL", "https://api.brevo.com/v3"),
    // When missing, `require` has recorded the problem and `done` fails; the placeholder is never used.
    apiKey: r.secret("BREVO_API_KEY") ?? Redacted.make(""),
    listIds,
    templates,
    redirectUrl: absoluteUrl(r, "BREVO_DOI_REDIRECT_URL")
  }
}

const readListmonk = (r: EnvReader): ListmonkSettings => {
  const why = "when NEWSLETTER_PROVIDER=listmonk"
  r.require("LISTMONK_URL", why)
  r.require("LISTMONK_LISTS", why)
  const url = r.raw("LISTMONK_URL") === undefined ? "" : r.url("LISTMONK_URL", "")
  const lists = perLocale(r, "LISTMONK_LISTS", "a list UUID", (v) => validator.isUUID(v) ? v.toLowerCase() : undefined, "")
  return { url, lists }
}

/** `es:11,en:12,...`: every locale must be present, each value valid. */
const perLocale = <A>(
  r: EnvReader,
  name: string,
  what: string,
  parse: (value: string) => A | undefined,
  placeholder: A
): Record<Locale, A> => {
  const raw = r.raw(name)
  const pairs = r.pairs(name, Locales)
  const out = {} as Record<Locale, A>
  const missing: Array<Locale> = []
  for (const locale of Locales) {
    const value = pairs.get(locale)
    if (value === undefined) {
      missing.push(locale)
      out[locale] = placeholder
      continue
    }
    const parsed = parse(value)
    if (parsed === undefined) r.problems.push(`${name}: locale "${locale}" needs ${what}, got "${value}"`)
    out[locale] = parsed ?? placeholder
  }
  // A missing variable is already reported by `require`; only a partial one needs this line.
  if (raw !== undefined && missing.length > 0) {
    r.problems.push(`${name}: missing locale(s) ${missing.join(", ")}; every locale (${Locales.join(", ")}) needs ${what}`)
  }
  return out
}

const positiveInt = (value: string): number | undefined => {
  const n = Number(value)
  return /^\d+$/.test(value) && Number.isSafeInteger(n) && n > 0 ? n : undefined
}

/** Kept verbatim (a trailing slash may matter to the landing page), unlike `EnvReader.url`. */
const absoluteUrl = (r: EnvReader, name: string): string => {
  const value = r.raw(name)
  if (value === undefined) return ""
  if (!URL.canParse(value) || !/^https?:$/.test(new URL(value).protocol)) {
    r.problems.push(`${name}: expected an absolute http(s) URL, got "${value}"`)
  }
  return value
}

export class NewsletterConfig extends Context.Service<NewsletterConfig, NewsletterConfigShape>()(
  "app/NewsletterConfig"
) {
  static readonly layer = Layer.effect(NewsletterConfig, Effect.suspend(() => readNewsletterConfig(process.env)))
  /** For tests: configuration from an explicit environment, never the process's. */
  static readonly layerFrom = (env: Env) => Layer.effect(NewsletterConfig, readNewsletterConfig(env))
}
