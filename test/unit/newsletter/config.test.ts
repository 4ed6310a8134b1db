import { Effect, Exit, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { configFrom, type Env } from "../../support/config.ts"
import { type NewsletterConfigShape, readNewsletterConfig } from "../../../src/newsletter/NewsletterConfig.ts"

const read = (env: Env) => Effect.runPromiseExit(readNewsletterConfig.pipe(Effect.provide(configFrom(env))))

const problemsOf = async (env: Env): Promise<ReadonlyArray<string>> => {
  const exit = await read(env)
  if (Exit.isSuccess(exit)) throw new Error("expected a configuration failure")
  const fail = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (fail === undefined || fail._tag !== "Fail") throw new Error(String(exit.cause))
  return fail.error.problems
}
const configOf = async (env: Env): Promise<NewsletterConfigShape> => {
  const exit = await read(env)
  if (Exit.isFailure(exit)) throw new Error(String(exit.cause))
  return exit.value
}

const brevo: Env = {
  NEWSLETTER_PROVIDER: "brevo",
  BREVO_API_KEY: "xkeysib-secret-value",
  BREVO_LIST_IDS: "7,8",
  BREVO_DOI_TEMPLATES: "es:11, en:12, fr:13, it:14, pt:15",
  BREVO_DOI_REDIRECT_URL: "https://landing.example/confirmed"
}
const listmonk: Env = {
  NEWSLETTER_PROVIDER: "listmonk",
  LISTMONK_URL: "https://lists.example/",
  LISTMONK_LISTS: "es:0B7E3F5C-1A2B-4C3D-8E4F-000000000001,en:0b7e3f5c-1a2b-4c3d-8e4f-000000000002," +
    "fr:0b7e3f5c-1a2b-4c3d-8e4f-000000000003,it:0b7e3f5c-1a2b-4c3d-8e4f-000000000004," +
    "pt:0b7e3f5c-1a2b-4c3d-8e4f-000000000005"
}

describe("NewsletterConfig", () => {
  it("defaults: local provider, ./data, 5 s per attempt, 8 s in all, 2 retries", async () => {
    const config = await configOf({})
    expect(config).toEqual({
      provider: "local",
      dataDir: "./data",
      call: { attemptTimeoutMs: 5000, deadlineMs: 8000, retries: 2 }
    })
  })

  it("brevo: parses every variable; the key is Redacted and never printed", async () => {
    const config = await configOf(brevo)
    if (config.provider !== "brevo") throw new Error("expected brevo")
    expect(config.brevo.baseUrl).toBe("https://api.brevo.com/v3")
    expect(config.brevo.listIds).toEqual([7, 8])
    expect(config.brevo.templates).toEqual({ es: 11, en: 12, fr: 13, it: 14, pt: 15 })
    expect(config.brevo.redirectUrl).toBe("https://landing.example/confirmed")
    expect(Redacted.value(config.brevo.apiKey)).toBe("xkeysib-secret-value")
    expect(JSON.stringify(config)).not.toContain("xkeysib-secret-value")
    expect(String(config.brevo.apiKey)).not.toContain("xkeysib-secret-value")
  })

  it("brevo: each missing variable is named", async () => {
    const problems = await problemsOf({ NEWSLETTER_PROVIDER: "brevo" })
    for (const name of ["BREVO_API_KEY", "BREVO_LIST_IDS", "BREVO_DOI_TEMPLATES", "BREVO_DOI_REDIRECT_URL"]) {
      expect(problems.some((p) => p.startsWith(`${name}: required`))).toBe(true)
    }
    expect(problems).toHaveLength(4)
  })

  it("brevo: templates must cover all five locales with positive ids, one line saying what is wrong", async () => {
    const partial = await problemsOf({ ...brevo, BREVO_DOI_TEMPLATES: "es:11,en:12,fr:13" })
    expect(partial).toEqual([expect.stringMatching(/^BREVO_DOI_TEMPLATES: expected .*\(missing locale\(s\): it, pt\)$/)])
    const bad = await problemsOf({ ...brevo, BREVO_DOI_TEMPLATES: "es:11,en:x,fr:13,it:0,pt:15,de:16" })
    expect(bad).toEqual([
      expect.stringMatching(/^BREVO_DOI_TEMPLATES: .*got "es:11,en:x,fr:13,it:0,pt:15,de:16" \(bad entries: "en:x", "it:0", "de:16"\)$/)
    ])
  })

  it("brevo: list ids must be positive integers; the redirect URL absolute", async () => {
    const problems = await problemsOf({ ...brevo, BREVO_LIST_IDS: "7,,abc", BREVO_DOI_REDIRECT_URL: "/confirmed" })
    expect(problems).toContain('BREVO_LIST_IDS: expected comma-separated positive integers, got "7,,abc"')
    expect(problems.some((p) => p.startsWith("BREVO_DOI_REDIRECT_URL: expected an absolute"))).toBe(true)
  })

  it("listmonk: URL without trailing slash, UUIDs lower-cased", async () => {
    const config = await configOf(listmonk)
    if (config.provider !== "listmonk") throw new Error("expected listmonk")
    expect(config.listmonk.url).toBe("https://lists.example")
    expect(config.listmonk.lists.es).toBe("0b7e3f5c-1a2b-4c3d-8e4f-000000000001")
  })

  it("listmonk: no API user by default; with LISTMONK_API_USER and LISTMONK_API_TOKEN, the token Redacted", async () => {
    const without = await configOf(listmonk)
    if (without.provider !== "listmonk") throw new Error("expected listmonk")
    expect(without.listmonk.apiUser).toBeUndefined()
    const config = await configOf({ ...listmonk, LISTMONK_API_USER: " checker ", LISTMONK_API_TOKEN: "lm-token-secret" })
    if (config.provider !== "listmonk") throw new Error("expected listmonk")
    expect(config.listmonk.apiUser?.user).toBe("checker")
    expect(Redacted.value(config.listmonk.apiUser!.token)).toBe("lm-token-secret")
    expect(JSON.stringify(config)).not.toContain("lm-token-secret")
    expect(String(config.listmonk.apiUser?.token)).not.toContain("lm-token-secret")
  })

  it("listmonk: the API user and its token go together; the other is named", async () => {
    expect(await problemsOf({ ...listmonk, LISTMONK_API_USER: "checker" })).toEqual([
      expect.stringMatching(/^LISTMONK_API_TOKEN: required when LISTMONK_API_USER is set .*set both or neither$/)
    ])
    const problems = await problemsOf({ ...listmonk, LISTMONK_API_TOKEN: "lm-token-secret", LISTMONK_LISTS: "es:nope" })
    expect(problems).toContainEqual(expect.stringMatching(/^LISTMONK_API_USER: required when LISTMONK_API_TOKEN is set/))
    expect(problems).toContainEqual(expect.stringMatching(/^LISTMONK_LISTS: /))
    expect(problems.join("\n")).not.toContain("lm-token-secret")
    // Blank is unset.
    const blank = await configOf({ ...listmonk, LISTMONK_API_USER: " ", LISTMONK_API_TOKEN: "" })
    expect(blank.provider === "listmonk" && blank.listmonk.apiUser).toBeUndefined()
  })

  it("listmonk: missing variables, missing locales and bad UUIDs are named", async () => {
    expect(await problemsOf({ NEWSLETTER_PROVIDER: "listmonk" })).toEqual([
      expect.stringMatching(/^LISTMONK_URL: required/),
      expect.stringMatching(/^LISTMONK_LISTS: required/)
    ])
    const problems = await problemsOf({ ...listmonk, LISTMONK_LISTS: "es:not-a-uuid,en:0b7e3f5c-1a2b-4c3d-8e4f-000000000002" })
    expect(problems).toEqual([
      expect.stringMatching(/^LISTMONK_LISTS: expected a list UUID .*\(bad entries: "es:not-a-uuid"; missing locale\(s\): fr, it, pt\)$/)
    ])
  })

  it("names an unknown provider and bad time bounds", async () => {
    const problems = await problemsOf({
      NEWSLETTER_PROVIDER: "mailchimp",
      NEWSLETTER_TIMEOUT_MS: "3000",
      NEWSLETTER_DEADLINE_MS: "1000",
      NEWSLETTER_RETRIES: "9"
    })
    expect(problems.some((p) => p.startsWith("NEWSLETTER_PROVIDER: expected one of brevo, listmonk, local"))).toBe(true)
    expect(problems.some((p) => p.startsWith("NEWSLETTER_DEADLINE_MS: must be at least NEWSLETTER_TIMEOUT_MS"))).toBe(true)
    expect(problems.some((p) => p.startsWith("NEWSLETTER_RETRIES"))).toBe(true)
  })

  it("production refuses local, explicitly or by default, and accepts a real provider", async () => {
    expect(await problemsOf({ APP_ENV: "production" })).toEqual([
      expect.stringMatching(/^NEWSLETTER_PROVIDER: "local" \(the default\) .*refused when APP_ENV=production/)
    ])
    expect(await problemsOf({ APP_ENV: "production", NEWSLETTER_PROVIDER: "local" })).toEqual([
      expect.stringMatching(/^NEWSLETTER_PROVIDER: "local" keeps/)
    ])
    expect((await configOf({ ...brevo, APP_ENV: "production" })).provider).toBe("brevo")
  })

  it("only the selected provider's variables matter", async () => {
    const config = await configOf({ NEWSLETTER_PROVIDER: "local", BREVO_LIST_IDS: "garbage", LISTMONK_URL: "nope" })
    expect(config.provider).toBe("local")
  })
})
