/**
 * The "local" provider: a durable list under DATA_DIR that survives restarts, concurrent sign-ups
 * in one process, several layer instances and several processes, and exports as CSV.
 */
import { execFile } from "node:child_process"
import { appendFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { subscribersCsv } from "../../../src/newsletter/csv.ts"
import { readSubscribers, subscribersPath } from "../../../src/newsletter/local.ts"
import type { Locale } from "../../../src/newsletter/Newsletter.ts"
import { buildError, LOCALES, liveNewsletter } from "./helpers.ts"

const run = promisify(execFile)
const ROOT = path.resolve(import.meta.dirname, "../../..")

let dataDir: string
beforeEach(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "newsletter-local-"))
})
afterEach(async () => {
  await rm(dataDir, { recursive: true, force: true })
})

const localEnv = () => ({ NEWSLETTER_PROVIDER: "local", DATA_DIR: dataDir })
const fileLines = async (): Promise<Array<string>> =>
  (await readFile(subscribersPath(dataDir), "utf8")).split("\n").filter((l) => l !== "")
const localeOf = (i: number): Locale => LOCALES[i % LOCALES.length] ?? "en"

describe("local subscriber list", () => {
  it("keeps every accepted address across a restart; re-subscription is existing", async () => {
    const first = await liveNewsletter(localEnv())
    const addresses = ["ana@example.com", "Bob@example.org", "chloe@example.fr", "dai@xn--bcher-kva.example"]
    for (const [i, email] of addresses.entries()) {
      expect(await first.subscribe({ email, locale: localeOf(i) })).toMatchObject({ ok: true, outcome: "created" })
    }
    expect(await first.subscribe({ email: "ana@example.com", locale: "es" })).toMatchObject({ outcome: "existing" })
    await first.dispose()

    // A new layer instance is what a restarted server builds.
    const second = await liveNewsletter(localEnv())
    try {
      for (const [i, email] of addresses.entries()) {
        expect(await second.subscribe({ email, locale: localeOf(i) })).toMatchObject({ ok: true, outcome: "existing" })
      }
      expect(await second.subscribe({ email: "eve@example.com", locale: "pt" })).toMatchObject({ outcome: "created" })
    } finally {
      await second.dispose()
    }
    const { subscribers, badLines } = await readSubscribers(subscribersPath(dataDir))
    expect(badLines).toBe(0)
    expect(subscribers.map((s) => [s.email, s.locale])).toEqual([
      ["ana@example.com", "es"],
      ["Bob@example.org", "en"],
      ["chloe@example.fr", "fr"],
      ["dai@xn--bcher-kva.example", "it"],
      ["eve@example.com", "pt"]
    ])
    // Nothing was re-written for the repeats.
    expect(await fileLines()).toHaveLength(5)
  })

  it("a new locale for a known address: existing, latest locale wins, first sign-up time kept", async () => {
    const newsletter = await liveNewsletter(localEnv())
    try {
      await newsletter.subscribe({ email: "move@example.com", locale: "es" })
      const before = (await readSubscribers(subscribersPath(dataDir))).subscribers[0]
      await new Promise((r) => setTimeout(r, 5))
      expect(await newsletter.subscribe({ email: "move@example.com", locale: "it" })).toMatchObject({ outcome: "existing" })
      const after = (await readSubscribers(subscribersPath(dataDir))).subscribers
      expect(after).toHaveLength(1)
      expect(after[0]).toEqual({ email: "move@example.com", locale: "it", subscribed_at: before?.subscribed_at })
    } finally {
      await newsletter.dispose()
    }
  })

  it("200 concurrent sign-ups in one process: exactly 200, one line each", async () => {
    const newsletter = await liveNewsletter(localEnv())
    try {
      const emails = Array.from({ length: 200 }, (_, i) => `user${i}@example.com`)
      // Each address twice, all at once: the second of each pair must see the first.
      const results = await Promise.all(
        [...emails, ...emails].map((email, i) => newsletter.subscribe({ email, locale: localeOf(i % 200) }))
      )
      expect(results.every((r) => r.ok)).toBe(true)
      expect(results.filter((r) => r.ok && r.outcome === "created")).toHaveLength(200)
      expect(results.filter((r) => r.ok && r.outcome === "existing")).toHaveLength(200)
    } finally {
      await newsletter.dispose()
    }
    const lines = await fileLines()
    expect(lines).toHaveLength(200)
    expect(new Set(lines.map((l) => JSON.parse(l).email)).size).toBe(200)
    const { subscribers, badLines } = await readSubscribers(subscribersPath(dataDir))
    expect(badLines).toBe(0)
    expect(subscribers).toHaveLength(200)
  })

  it("two layer instances writing the same file at once lose nothing", async () => {
    const a = await liveNewsletter(localEnv())
    const b = await liveNewsletter(localEnv())
    try {
      const job = (n: typeof a, prefix: string) =>
        Promise.all(
          Array.from({ length: 120 }, (_, i) => i < 100 ? `${prefix}${i}@example.com` : `both${i}@example.com`)
            .map((email, i) => n.subscribe({ email, locale: localeOf(i) }))
        )
      const [ra, rb] = await Promise.all([job(a, "a"), job(b, "b")])
      expect([...ra, ...rb].every((r) => r.ok)).toBe(true)
    } finally {
      await a.dispose()
      await b.dispose()
    }
    const { subscribers, badLines } = await readSubscribers(subscribersPath(dataDir))
    expect(badLines).toBe(0)
    expect(subscribers).toHaveLength(220)
    for (const line of await fileLines()) expect(() => JSON.parse(line)).not.toThrow()
  })

  it("two processes writing the same file at once lose nothing and never tear a line", async () => {
    const writer = path.join(ROOT, "test/integration/newsletter/fixtures/local-writer.ts")
    const child = (prefix: string) =>
      run(process.execPath, [writer, dataDir, prefix, "150", "30"], { cwd: ROOT, timeout: 60_000 })
    const [one, two] = await Promise.all([child("p"), child("q")])
    const counts = [one, two].map((r) => JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}") as Record<string, number>)
    for (const c of counts) expect((c.created ?? 0) + (c.existing ?? 0)).toBe(180)

    const lines = await fileLines()
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow()
    const { subscribers, badLines } = await readSubscribers(subscribersPath(dataDir))
    expect(badLines).toBe(0)
    // 150 + 150 own addresses and 30 shared ones.
    expect(subscribers).toHaveLength(330)
    const emails = new Set(subscribers.map((s) => s.email))
    for (let i = 0; i < 150; i++) {
      expect(emails.has(`p${i}@example.com`)).toBe(true)
      expect(emails.has(`q${i}@example.com`)).toBe(true)
    }
    // A shared address may be appended by both processes in the same instant; never more.
    expect(lines.length).toBeGreaterThanOrEqual(330)
    expect(lines.length).toBeLessThanOrEqual(360)
  }, 90_000)

  it("sees addresses another instance added after it started", async () => {
    const a = await liveNewsletter(localEnv())
    const b = await liveNewsletter(localEnv())
    try {
      expect(await a.subscribe({ email: "late@example.com", locale: "en" })).toMatchObject({ outcome: "created" })
      expect(await b.subscribe({ email: "late@example.com", locale: "en" })).toMatchObject({ outcome: "existing" })
    } finally {
      await a.dispose()
      await b.dispose()
    }
  })

  it("a torn last line (crash mid-write) is skipped and the next sign-up starts a new line", async () => {
    await writeFile(
      subscribersPath(dataDir),
      "{\"email\":\"ok@example.com\",\"locale\":\"es\",\"subscribed_at\":\"2026-01-01T00:00:00.000Z\"}\n{\"email\":\"torn@exa"
    )
    const newsletter = await liveNewsletter(localEnv())
    try {
      expect(await newsletter.subscribe({ email: "ok@example.com", locale: "es" })).toMatchObject({ outcome: "existing" })
      expect(await newsletter.subscribe({ email: "next@example.com", locale: "en" })).toMatchObject({ outcome: "created" })
    } finally {
      await newsletter.dispose()
    }
    const { subscribers, badLines } = await readSubscribers(subscribersPath(dataDir))
    expect(badLines).toBe(1)
    expect(subscribers.map((s) => s.email)).toEqual(["ok@example.com", "next@example.com"])
  })

  it("refuses an invalid address itself", async () => {
    const newsletter = await liveNewsletter(localEnv())
    try {
      const result = await newsletter.subscribe({ email: "no-at-sign", locale: "en" })
      expect(result).toMatchObject({ ok: false, tag: "NewsletterInvalidEmail" })
      if (!result.ok) expect(result.reason).toContain("@")
    } finally {
      await newsletter.dispose()
    }
    expect((await readSubscribers(subscribersPath(dataDir))).subscribers).toHaveLength(0)
  })

  it("the log line for a refused address masks it", async () => {
    const newsletter = await liveNewsletter(localEnv())
    try {
      await newsletter.subscribe({ email: "Hidden Name@example.com", locale: "en" })
      const logs = newsletter.logs().join("\n")
      expect(logs).toContain("H***@example.com")
      expect(logs).not.toContain("Hidden Name")
    } finally {
      await newsletter.dispose()
    }
  })

  it("is refused when APP_ENV=production, naming NEWSLETTER_PROVIDER", async () => {
    const explicit = await buildError({ ...localEnv(), APP_ENV: "production" })
    expect(explicit).toMatch(/NEWSLETTER_PROVIDER: "local"/)
    expect(explicit).toMatch(/APP_ENV=production/)
    const byDefault = await buildError({ DATA_DIR: dataDir, APP_ENV: "production" })
    expect(byDefault).toMatch(/NEWSLETTER_PROVIDER: "local" \(the default\)/)
    expect(await buildError({ ...localEnv(), APP_ENV: "staging" })).toBeUndefined()
  })

  it("an unusable DATA_DIR fails start-up naming DATA_DIR", async () => {
    const notADirectory = path.join(dataDir, "file")
    await writeFile(notADirectory, "x")
    const message = await buildError({ NEWSLETTER_PROVIDER: "local", DATA_DIR: notADirectory })
    expect(message).toMatch(/DATA_DIR: cannot open the subscriber list/)
  })
})

describe("CSV export", () => {
  it("quotes fields that need it (RFC 4180)", () => {
    const csv = subscribersCsv([
      { email: "plain@example.com", locale: "es", subscribed_at: "2026-01-01T00:00:00.000Z" },
      { email: "\"odd,one\"@example.com", locale: "en", subscribed_at: "2026-01-02T00:00:00.000Z" },
      { email: "line\nbreak@example.com", locale: "fr", subscribed_at: "2026-01-03T00:00:00.000Z" }
    ])
    expect(csv).toBe(
      "email,locale,subscribed_at\r\n" +
        "plain@example.com,es,2026-01-01T00:00:00.000Z\r\n" +
        "\"\"\"odd,one\"\"@example.com\",en,2026-01-02T00:00:00.000Z\r\n" +
        "\"line\nbreak@example.com\",fr,2026-01-03T00:00:00.000Z\r\n"
    )
  })

  it("node src/cli/subscribers.ts export prints and writes the deduplicated list", async () => {
    const newsletter = await liveNewsletter(localEnv())
    try {
      await newsletter.subscribe({ email: "one@example.com", locale: "es" })
      await newsletter.subscribe({ email: "two@example.com", locale: "en" })
      await newsletter.subscribe({ email: "one@example.com", locale: "pt" })
    } finally {
      await newsletter.dispose()
    }
    // A line from a hand edit that cannot be read is skipped and reported, not fatal.
    await appendFile(subscribersPath(dataDir), "not json\n")
    const { subscribers } = await readSubscribers(subscribersPath(dataDir))
    const expected = "email,locale,subscribed_at\r\n" +
      `one@example.com,pt,${subscribers[0]?.subscribed_at}\r\n` +
      `two@example.com,en,${subscribers[1]?.subscribed_at}\r\n`

    const script = path.join(ROOT, "src/cli/subscribers.ts")
    const env = { ...process.env, DATA_DIR: dataDir }
    const printed = await run(process.execPath, [script, "export"], { cwd: ROOT, env })
    expect(printed.stdout).toBe(expected)
    expect(printed.stderr).toMatch(/1 unreadable line/)

    const out = path.join(dataDir, "export.csv")
    const written = await run(process.execPath, [script, "export", "--out", out], { cwd: ROOT, env })
    expect(written.stdout).toBe("")
    expect(await readFile(out, "utf8")).toBe(expected)

    await expect(run(process.execPath, [script, "frobnicate"], { cwd: ROOT, env })).rejects.toMatchObject({ code: 2 })
  })

  it("an empty or missing list exports only the header", async () => {
    const script = path.join(ROOT, "src/cli/subscribers.ts")
    const printed = await run(process.execPath, [script, "export", "--data-dir", dataDir], { cwd: ROOT })
    expect(printed.stdout).toBe("email,locale,subscribed_at\r\n")
  })
})
