/**
 * Configuration (CONTRACT C2): read through Effect's ConfigProvider, every bad variable of every group
 * reported at once, one line each; the production rules; the defaults; and the entrypoint's message.
 */
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { Effect, Exit, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { AppConfig, readAppConfig } from "../../../src/config/AppConfig.ts"
import type { ConfigInvalid } from "../../../src/config/ConfigInvalid.ts"
import { validateConfiguration } from "../../../src/checkConfiguration.ts"
import { readOAuthConfig } from "../../../src/oauth/OAuthConfig.ts"
import { configFrom, type Env } from "../../support/config.ts"
import { childEnv, tempDataDir } from "../../support/spawn.ts"

const run = <A>(reading: Effect.Effect<A, ConfigInvalid>, env: Env) =>
  Effect.runPromiseExit(reading.pipe(Effect.provide(configFrom(env))))

const problemsOf = async <A>(reading: Effect.Effect<A, ConfigInvalid>, env: Env): Promise<ReadonlyArray<string>> => {
  const exit = await run(reading, env)
  if (Exit.isSuccess(exit)) throw new Error("expected a configuration failure")
  const error = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (error?._tag !== "Fail") throw new Error(String(exit.cause))
  return error.error.problems
}

const valueOf = async <A>(reading: Effect.Effect<A, ConfigInvalid>, env: Env): Promise<A> => {
  const exit = await run(reading, env)
  if (Exit.isFailure(exit)) throw new Error(String(exit.cause))
  return exit.value
}

const trustProxy = async (value: string) => (await valueOf(readAppConfig, { TRUST_PROXY: value })).trustProxyRule
const listmonk: Env = {
  NEWSLETTER_PROVIDER: "listmonk",
  LISTMONK_URL: "http://127.0.0.1:9",
  LISTMONK_LISTS: ["es", "en", "fr", "it", "pt"].map((l, i) => `${l}:0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a6${i}`).join(",")
}
const signingKeys = JSON.stringify({ keys: [{ kty: "EC", crv: "P-256", x: "abc", y: "def", d: "ghi" }] })
const pepper = "p".repeat(32)

describe("every bad variable at once", () => {
  it("names each, across every group, one line each, with what it accepts and what it got", async () => {
    const problems = await problemsOf(validateConfiguration, {
      PORT: "abc",
      APP_ENV: "bad\tenv",
      NEWSLETTER_PROVIDER: "foo",
      CORS_ORIGINS: "https://app.example,https://other.example/path",
      REDIS_URL: "notaurl",
      TRUST_PROXY: "maybe",
      DATABASE_URL: "mysql://user:hunter2@db/app",
      COINGECKO_TIMEOUT_MS: "fast",
      OAUTH_MAX_FAILURES_PER_MIN: "0",
      WEB_CONCURRENCY: "100"
    })
    expect(problems).toEqual(expect.arrayContaining([
      `PORT: expected an integer from 0 to 65535, got "abc"`,
      `APP_ENV: expected printable text of 1 to 64 characters (no control characters), got "bad\\tenv"`,
      `NEWSLETTER_PROVIDER: expected one of brevo, listmonk, local, got "foo"`,
      expect.stringMatching(/^CORS_ORIGINS: expected .*got "https:\/\/app.example,https:\/\/other.example\/path" \(bad entry "https:\/\/other.example\/path"\)$/),
      expect.stringMatching(/^REDIS_URL: expected a redis:\/\/ or rediss:\/\/ URL, got a value \(not shown: secret\)$/),
      expect.stringMatching(/^TRUST_PROXY: expected true or false, a hop count .*got "maybe"/),
      expect.stringMatching(/^DATABASE_URL: expected a postgres:\/\/ or postgresql:\/\/ URL/),
      `COINGECKO_TIMEOUT_MS: expected an integer from 50 to 60000, got "fast"`,
      `OAUTH_MAX_FAILURES_PER_MIN: expected an integer from 1 to 10000, got "0"`,
      `WEB_CONCURRENCY: expected an integer from 1 to 64, got "100"`
    ]))
    expect(problems).toHaveLength(10)
    expect(problems.join("\n")).not.toContain("hunter2")
  })

  it("REDIS_URL must be a redis URL, DATABASE_URL a PostgreSQL one; both stay Redacted", async () => {
    expect(await problemsOf(readAppConfig, { REDIS_URL: "http://cache:6379" })).toEqual([
      expect.stringMatching(/^REDIS_URL: /)
    ])
    const config = await valueOf(readAppConfig, {
      REDIS_URL: "rediss://:s3cret@cache:6380/0",
      DATABASE_URL: "postgresql://app:s3cret@db:5432/app"
    })
    expect(Redacted.value(config.redisUrl!)).toBe("rediss://:s3cret@cache:6380/0")
    expect(Redacted.value(config.databaseUrl!)).toBe("postgresql://app:s3cret@db:5432/app")
    expect(JSON.stringify(config)).not.toContain("s3cret")
    expect((await valueOf(readAppConfig, { DATABASE_URL: "postgres://db/app" })).databaseUrl).toBeDefined()
  })

  it("CORS_ORIGINS: * alone, or origins without a path", async () => {
    expect((await valueOf(readAppConfig, {})).corsOrigins).toBe("*")
    expect((await valueOf(readAppConfig, { CORS_ORIGINS: "https://App.example:443, http://localhost:5173" })).corsOrigins)
      .toEqual(["https://app.example", "http://localhost:5173"])
    for (const bad of ["https://a.example,*", "app.example", "ftp://a.example", "https://a.example/", "https://u:p@a.example"]) {
      expect(await problemsOf(readAppConfig, { CORS_ORIGINS: bad })).toEqual([expect.stringMatching(/^CORS_ORIGINS: /)])
    }
  })

  it("TRUST_PROXY: false, true, a hop count or CIDRs, parsed into a rule", async () => {
    expect(await trustProxy("false")).toEqual({ _tag: "None" })
    expect(await trustProxy("true")).toEqual({ _tag: "Hops", hops: 1 })
    expect(await trustProxy("2")).toEqual({ _tag: "Hops", hops: 2 })
    expect(await trustProxy("10.0.0.0/8, 192.168.1.7, fd00::/8")).toEqual({
      _tag: "Cidrs",
      cidrs: ["10.0.0.0/8", "192.168.1.7/32", "fd00::/8"]
    })
    for (const bad of ["maybe", "-1", "10.0.0.0/33", "10.0.0.1/8", "10.0.0.0/8,proxy.internal", "300.1.1.1"]) {
      expect(await problemsOf(readAppConfig, { TRUST_PROXY: bad })).toEqual([
        expect.stringMatching(new RegExp(`^TRUST_PROXY: expected .*, got ${JSON.stringify(bad).replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}`))
      ])
    }
    expect((await problemsOf(readAppConfig, { TRUST_PROXY: "10.0.0.1/8" }))[0]).toMatch(/host bits/)
  })

  it("WEB_CONCURRENCY above 1 needs REDIS_URL", async () => {
    expect(await problemsOf(validateConfiguration, { WEB_CONCURRENCY: "2" })).toEqual([
      expect.stringMatching(/^WEB_CONCURRENCY: more than one worker needs REDIS_URL/)
    ])
    const ok = await valueOf(validateConfiguration, { WEB_CONCURRENCY: "2", REDIS_URL: "redis://127.0.0.1:6379" })
    expect(ok.webConcurrency).toBe(2)
  })
})

describe("production rules (APP_ENV=production), each in one place", () => {
  it("refuses the local newsletter list and generated OAuth key material, naming what to set", async () => {
    const problems = await problemsOf(validateConfiguration, { APP_ENV: "production" })
    expect(problems).toEqual([
      expect.stringMatching(/^NEWSLETTER_PROVIDER: "local" \(the default\) .*refused when APP_ENV=production/),
      expect.stringMatching(/^OAUTH_SECRET_PEPPER: required in production/),
      expect.stringMatching(/^OAUTH_SIGNING_KEYS: required in production/)
    ])
  })

  it("accepts a real provider with configured keys and pepper", async () => {
    const valid = await valueOf(validateConfiguration, {
      APP_ENV: "production",
      ...listmonk,
      OAUTH_SIGNING_KEYS: signingKeys,
      OAUTH_SECRET_PEPPER: pepper
    })
    expect(valid.app.isProduction).toBe(true)
    expect(valid.newsletter.provider).toBe("listmonk")
  })

  it("other environments may generate key material", async () => {
    for (const APP_ENV of ["development", "test", "staging", "eu-canary-2", "Production"]) {
      const oauth = await valueOf(readOAuthConfig, { APP_ENV })
      expect(oauth.signingKeys).toBeUndefined()
    }
  })
})

describe("APP_ENV (C2: free text)", () => {
  it("is any printable text, trimmed; only `production` exactly is production", async () => {
    for (const [raw, appEnv, isProduction] of [
      ["eu-canary-2", "eu-canary-2", false],
      ["preview-123", "preview-123", false],
      [" qa ", "qa", false],
      ["zürich blue", "zürich blue", false],
      ["production", "production", true],
      ["Production", "Production", false]
    ] as const) {
      expect(await valueOf(readAppConfig, { APP_ENV: raw })).toMatchObject({ appEnv, isProduction })
    }
  })

  it("refuses control characters, blank and over 64 characters (empty is unset, as for every variable)", async () => {
    expect(await valueOf(readAppConfig, { APP_ENV: "" })).toMatchObject({ appEnv: "development" })
    for (const raw of ["a\u0000b", "line\nbreak", "\u001b[31mred", "bidi\u202eoverride", "   ", "x".repeat(65)]) {
      expect(await problemsOf(readAppConfig, { APP_ENV: raw })).toEqual([
        `APP_ENV: expected printable text of 1 to 64 characters (no control characters), got ${JSON.stringify(raw)}`
      ])
    }
  })
})

describe("defaults", () => {
  it("with no variable set, every group reads its defaults", async () => {
    const valid = await valueOf(validateConfiguration, {})
    expect(valid.app).toMatchObject({
      port: 3000,
      host: "0.0.0.0",
      appEnv: "development",
      isProduction: false,
      publicBaseUrl: "http://localhost:3000",
      dataDir: "./data",
      corsOrigins: "*",
      trustProxyRule: { _tag: "None" },
      redisUrl: undefined,
      databaseUrl: undefined,
      tokenTtlSeconds: 900,
      rateLimits: { rates: 60, subscribe: 5 },
      metricsPort: undefined
    })
    expect(valid.rates.baseUrl).toBe("https://api.coingecko.com/api/v3")
    expect(valid.newsletter.provider).toBe("local")
    expect(valid.oauth.maxFailuresPerMinute).toBe(10)
    expect(valid.webConcurrency).toBe(1)
  })

  it("PUBLIC_BASE_URL follows PORT and loses its trailing slash", async () => {
    expect((await valueOf(readAppConfig, { PORT: "8080" })).publicBaseUrl).toBe("http://localhost:8080")
    expect((await valueOf(readAppConfig, { PUBLIC_BASE_URL: "https://api.example/" })).publicBaseUrl).toBe("https://api.example")
  })

  it("UPSTREAM_USER_AGENT: by default the package's name, version and PUBLIC_BASE_URL; else the text given, one header line", async () => {
    const version = (JSON.parse(readFileSync("package.json", "utf8")) as { version: string }).version
    expect((await valueOf(readAppConfig, { PUBLIC_BASE_URL: "https://api.example/" })).upstreamUserAgent).toBe(`crypto-landing-api/${version} (+https://api.example)`)
    expect((await valueOf(readAppConfig, { UPSTREAM_USER_AGENT: " acme/2 (+mailto:ops@acme.example) " })).upstreamUserAgent).toBe("acme/2 (+mailto:ops@acme.example)")
    for (const bad of ["acme\r\nX-Injected: 1", "caf\u00e9/1", "x".repeat(257)]) {
      expect(await problemsOf(readAppConfig, { UPSTREAM_USER_AGENT: bad })).toEqual([expect.stringMatching(/^UPSTREAM_USER_AGENT: expected a descriptive User-Agent/)])
    }
  })

  it("AppConfig.layer reads the provider in place", async () => {
    const config = await Effect.runPromise(
      Effect.service(AppConfig).pipe(Effect.provide(AppConfig.layer), Effect.provide(configFrom({ PORT: "4000" })))
    )
    expect(config.port).toBe(4000)
  })
})

describe("the entrypoint", () => {
  it("prints every bad variable, no stack trace, and exits 1 before starting anything", () => {
    const run = spawnSync(process.execPath, ["src/main.ts"], {
      env: {
        ...childEnv,
        DATA_DIR: tempDataDir(),
        PORT: "abc",
        NEWSLETTER_PROVIDER: "foo",
        REDIS_URL: "notaurl",
        TRUST_PROXY: "10.0.0.0/8,nope"
      },
      encoding: "utf8",
      timeout: 20_000
    })
    expect(run.status).toBe(1)
    expect(run.stderr).toMatch(/^Invalid configuration:\n {2}- /)
    expect(run.stderr).toContain(`  - PORT: expected an integer from 0 to 65535, got "abc"\n`)
    expect(run.stderr).toContain(`  - NEWSLETTER_PROVIDER: expected one of brevo, listmonk, local, got "foo"\n`)
    expect(run.stderr).toMatch(/ {2}- REDIS_URL: expected a redis:\/\/ or rediss:\/\/ URL/)
    expect(run.stderr).toMatch(/ {2}- TRUST_PROXY: expected .*"nope" is not a CIDR/)
    expect(run.stderr).not.toMatch(/\n\s+at /)
    expect(run.stderr.trim().split("\n")).toHaveLength(5)
    expect(run.stdout).toBe("")
  })
})
