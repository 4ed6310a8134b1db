/**
 * Newsletter configuration (CONTRACT C2), read from the current `ConfigProvider` so that start-up
 * reports every bad variable at once, each by name. Only the selected provider's variables are read.
 */
import { Config, Context, Effect, Layer, Redacted } from "effect"
import validator from "validator"
import { Locale as LocaleSchema } from "../api/schemas.ts"
import { ConfigInvalid } from "../config/ConfigInvalid.ts"
import {
  checked,
  dataDir,
  fromOptional,
  httpUrl,
  int,
  isProduction,
  oneOf,
  optional,
  parsed,
  problem,
  readAll,
  required,
  secret
} from "../config/read.ts"

type Locale = typeof LocaleSchema.Type
/** The contract's locales (the subscribe request's `locale`): each needs its template or list. */
const Locales: ReadonlyArray<Locale> = LocaleSchema.literals

const NewsletterProviders = ["brevo", "listmonk", "local"] as const

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
  /** A Listmonk 4+ API user that may read the lists: with it, they are checked at start-up. */
  readonly apiUser: ListmonkApiUser | undefined
}

export interface ListmonkApiUser {
  readonly user: string
  readonly token: Redacted.Redacted<string>
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
  readonly dataDir: string
  readonly call: CallPolicy
}

export type NewsletterConfigShape =
  | (Common & { readonly provider: "brevo"; readonly brevo: BrevoSettings })
  | (Common & { readonly provider: "listmonk"; readonly listmonk: ListmonkSettings })
  | (Common & { readonly provider: "local" })

const provider = oneOf("NEWSLETTER_PROVIDER", NewsletterProviders, "local")

// The deadline rule reads only the two bounds, so a bad NEWSLETTER_RETRIES does not hide it.
const callPolicy: Effect.Effect<CallPolicy, ConfigInvalid> = Effect.map(
  readAll({
    bounds: checked(
      readAll({
        attemptTimeoutMs: int("NEWSLETTER_TIMEOUT_MS", 5_000, 10, 60_000),
        deadlineMs: int("NEWSLETTER_DEADLINE_MS", 8_000, 10, 120_000)
      }),
      ({ attemptTimeoutMs, deadlineMs }) =>
        deadlineMs < attemptTimeoutMs
          ? [`NEWSLETTER_DEADLINE_MS: must be at least NEWSLETTER_TIMEOUT_MS (${attemptTimeoutMs}), got ${deadlineMs}`]
          : []
    ),
    retries: int("NEWSLETTER_RETRIES", 2, 0, 5)
  }),
  ({ bounds, retries }) => ({ ...bounds, retries })
)

const positiveInt = (value: string): number | undefined => {
  const n = Number(value)
  return /^\d+$/.test(value) && Number.isSafeInteger(n) && n > 0 ? n : undefined
}

/** `es:11,en:12,...`: every locale once, no other key, each value valid; the line says what is wrong. */
const perLocale = <A>(name: string, what: string, parse: (value: string) => A | undefined) =>
  Config.String(name).pipe(Config.flatMap((raw) => {
    const out: Partial<Record<Locale, A>> = {}
    const bad: Array<string> = []
    for (const part of raw.split(",").map((p) => p.trim())) {
      const i = part.indexOf(":")
      const key = part.slice(0, i).trim()
      const value = parse(part.slice(i + 1).trim())
      if (i > 0 && value !== undefined && (Locales as ReadonlyArray<string>).includes(key)) out[key as Locale] = value
      else bad.push(part)
    }
    const missing = Locales.filter((l) => out[l] === undefined && !bad.some((b) => b.startsWith(`${l}:`)))
    if (bad.length === 0 && missing.length === 0) return Config.succeed(out as Record<Locale, A>)
    const details = [
      ...(bad.length > 0 ? [`bad entries: ${bad.map((b) => JSON.stringify(b)).join(", ")}`] : []),
      ...(missing.length > 0 ? [`missing locale(s): ${missing.join(", ")}`] : [])
    ]
    return problem(
      `${name}: expected ${what} for each locale (${Locales.join(", ")}) as "es:…,en:…", got ${JSON.stringify(raw)}` +
        ` (${details.join("; ")})`
    )
  }))

const brevo: Effect.Effect<BrevoSettings, ConfigInvalid> = Effect.suspend(() => {
  const why = "when NEWSLETTER_PROVIDER=brevo"
  return readAll({
    baseUrl: httpUrl("BREVO_BASE_URL").pipe(Config.withDefault("https://api.brevo.com/v3")),
    apiKey: secret("BREVO_API_KEY").pipe(required("BREVO_API_KEY", why)),
    listIds: parsed("BREVO_LIST_IDS", "comma-separated positive integers", (raw) => {
      const ids = raw.split(",").map((p) => positiveInt(p.trim()))
      return fromOptional(ids.every((id) => id !== undefined) ? [...new Set(ids)] : undefined)
    }).pipe(required("BREVO_LIST_IDS", why)),
    templates: perLocale("BREVO_DOI_TEMPLATES", "a positive template id", positiveInt).pipe(
      required("BREVO_DOI_TEMPLATES", why)
    ),
    // Kept verbatim, unlike `httpUrl` (a trailing slash may matter to the landing page).
    redirectUrl: parsed(
      "BREVO_DOI_REDIRECT_URL",
      "an absolute http(s) URL",
      (raw) => fromOptional(URL.canParse(raw) && /^https?:$/.test(new URL(raw).protocol) ? raw : undefined)
    ).pipe(required("BREVO_DOI_REDIRECT_URL", why))
  })
})

/** Both or neither: one without the other is a mistake, not a choice to skip the check. */
const listmonkApiUser: Effect.Effect<ListmonkApiUser | undefined, ConfigInvalid> = Effect.flatMap(
  readAll({
    user: optional(Config.String("LISTMONK_API_USER").pipe(Config.map((u) => u.trim()))),
    token: optional(secret("LISTMONK_API_TOKEN"))
  }),
  (read) => {
    const user = read.user === "" ? undefined : read.user
    const token = read.token !== undefined && Redacted.value(read.token) !== "" ? read.token : undefined
    if (user !== undefined && token !== undefined) return Effect.succeed({ user, token })
    if (user === undefined && token === undefined) return Effect.succeed(undefined)
    const [missing, set] = user !== undefined ? ["LISTMONK_API_TOKEN", "LISTMONK_API_USER"] : ["LISTMONK_API_USER", "LISTMONK_API_TOKEN"]
    return Effect.fail(
      new ConfigInvalid({
        problems: [`${missing}: required when ${set} is set (a Listmonk 4+ API user and its token, to check LISTMONK_LISTS at start-up); set both or neither`]
      })
    )
  }
)

const listmonk: Effect.Effect<ListmonkSettings, ConfigInvalid> = Effect.suspend(() => {
  const why = "when NEWSLETTER_PROVIDER=listmonk"
  return readAll({
    url: httpUrl("LISTMONK_URL").pipe(required("LISTMONK_URL", why)),
    lists: perLocale("LISTMONK_LISTS", "a list UUID", (v) => (validator.isUUID(v) ? v.toLowerCase() : undefined)).pipe(
      required("LISTMONK_LISTS", why)
    ),
    apiUser: listmonkApiUser
  })
})

/** The provider and its settings; the local list is refused in production (its one place: here). */
const selected = Effect.gen(function*() {
  const name = yield* provider
  switch (name) {
    case "brevo":
      return { provider: name, brevo: yield* brevo } as const
    case "listmonk":
      return { provider: name, listmonk: yield* listmonk } as const
    case "local": {
      if (yield* isProduction) {
        const byDefault = (yield* Effect.option(Config.String("NEWSLETTER_PROVIDER")))._tag === "None"
        return yield* problem(
          `NEWSLETTER_PROVIDER: "local" ${byDefault ? "(the default) " : ""}keeps subscribers in a file and is ` +
            `refused when APP_ENV=production; set it to brevo or listmonk`
        )
      }
      return { provider: name } as const
    }
  }
})

export const readNewsletterConfig: Effect.Effect<NewsletterConfigShape, ConfigInvalid> = Effect.map(
  readAll({ dataDir, call: callPolicy, selected }),
  ({ dataDir, call, selected }) => ({ dataDir, call, ...selected })
)

export class NewsletterConfig extends Context.Service<NewsletterConfig, NewsletterConfigShape>()(
  "app/NewsletterConfig"
) {
  /** From the current `ConfigProvider`: the process environment, or a test's (test/support/config.ts). */
  static readonly layer = Layer.effect(NewsletterConfig, readNewsletterConfig)
}
