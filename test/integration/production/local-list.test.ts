/**
 * The local subscriber list through the real process: 200 concurrent sign-ups over HTTP, a restart,
 * and the CSV export still holds every accepted address exactly once, with its locale.
 */
import { spawnSync } from "node:child_process"
import { afterAll, describe, expect, it } from "vitest"
import { type ServiceProcess, spawnService, tempDataDir } from "../../support/spawn.ts"

const running: Array<ServiceProcess> = []
afterAll(() => Promise.all(running.map((s) => s.stop("SIGKILL"))))

const locales = ["es", "en", "fr", "it", "pt"] as const

describe("NEWSLETTER_PROVIDER=local", () => {
  it("keeps every accepted address across 200 concurrent sign-ups and a restart", async () => {
    const dataDir = tempDataDir()
    const env = { DATA_DIR: dataDir, NEWSLETTER_PROVIDER: "local", RATE_LIMIT_SUBSCRIBE_PER_MIN: "100000" }
    const first = await spawnService(env)
    running.push(first)
    const addresses = Array.from({ length: 200 }, (_, i) => ({ email: `reader${i}@Example.COM`, locale: locales[i % 5]! }))
    const statuses = await Promise.all(addresses.map((body) =>
      fetch(`${first.url}/api/subscribe`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
        .then((r) => r.status)
    ))
    expect(statuses.every((s) => s === 200)).toBe(true)
    expect(await first.stop("SIGTERM")).toBe(0)

    const second = await spawnService(env)
    running.push(second)
    const again = await fetch(`${second.url}/api/subscribe`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(addresses[0])
    })
    expect(again.status).toBe(200)

    const exported = spawnSync(process.execPath, ["src/cli/subscribers.ts", "export", "--data-dir", dataDir], { encoding: "utf8" })
    expect(exported.status).toBe(0)
    const rows = exported.stdout.trim().split(/\r?\n/).slice(1).map((line) => line.split(","))
    expect(rows).toHaveLength(200)
    const byEmail = new Map(rows.map(([email, locale]) => [email, locale]))
    for (const { email, locale } of addresses) {
      // The domain is normalised (lower-cased) before it is stored; the local part is kept.
      expect(byEmail.get(email.replace("@Example.COM", "@example.com"))).toBe(locale)
    }
  }, 60_000)
})
