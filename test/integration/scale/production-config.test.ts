/**
 * APP_ENV=production with DATABASE_URL (issue 16, C6): the signing keys may live in PostgreSQL (shared by
 * every instance, durable), so OAUTH_SIGNING_KEYS is no longer required; the pepper still is, so that
 * the database alone never holds what checks a secret.
 */
import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { ConfigInvalid } from "../../../src/config/ConfigInvalid.ts"
import { validateConfiguration } from "../../../src/checkConfiguration.ts"
import { configFrom } from "../../support/config.ts"

const problemsOf = async (env: Record<string, string>) => {
  const exit = await Effect.runPromiseExit(validateConfiguration.pipe(Effect.provide(configFrom(env))))
  if (Exit.isSuccess(exit)) return []
  const error = exit.cause.reasons.map((r) => ("error" in r ? r.error : undefined)).find((e) => e instanceof ConfigInvalid)
  return (error as ConfigInvalid).problems
}

describe("production with DATABASE_URL", () => {
  it("needs the pepper but not OAUTH_SIGNING_KEYS; without DATABASE_URL both", async () => {
    const base = { APP_ENV: "production", NEWSLETTER_PROVIDER: "brevo", BREVO_API_KEY: "k", BREVO_LIST_IDS: "1" }
    const withDatabase = await problemsOf({ ...base, DATABASE_URL: "postgres://db/app" })
    expect(withDatabase.filter((p) => p.startsWith("OAUTH_"))).toEqual([expect.stringMatching(/^OAUTH_SECRET_PEPPER: required in production/)])
    const withoutDatabase = await problemsOf(base)
    expect(withoutDatabase.filter((p) => p.startsWith("OAUTH_"))).toEqual([
      expect.stringMatching(/^OAUTH_SECRET_PEPPER: required in production/),
      expect.stringMatching(/^OAUTH_SIGNING_KEYS: required in production/)
    ])
  })
})
