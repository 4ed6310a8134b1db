/**
 * Issue 35's Listmonk lists as an operator meets them, on the real entrypoint: with an API user, a list
 * of LISTMONK_LISTS that Listmonk does not have refuses the start, naming the variable and the entry;
 * without one, the service starts and says once that the lists are unchecked.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ListmonkEmulator, startListmonkEmulator } from "../../emulators/listmonk.ts"
import { spawnService, startExpectingFailure } from "../../support/spawn.ts"

const LOCALES = ["es", "en", "fr", "it", "pt"] as const
const uuid = (i: number) => `5d1f3b2a-7c4e-4a9b-8e6d-00000000003${i}`
const LISTS = LOCALES.map((l, i) => `${l}:${uuid(i)}`).join(",")

let listmonk: ListmonkEmulator
beforeAll(async () => {
  // Every list but pt's.
  listmonk = await startListmonkEmulator({ lists: [0, 1, 2, 3].map(uuid), apiUser: { user: "checker", token: "lm-token" } })
})
afterAll(() => listmonk.close())

const env = (extra: Record<string, string> = {}) => ({
  NEWSLETTER_PROVIDER: "listmonk",
  LISTMONK_URL: listmonk.origin,
  LISTMONK_LISTS: LISTS,
  ...extra
})

describe("Listmonk's lists at start-up", () => {
  it("with an API user, a list Listmonk does not have: exit 1 naming LISTMONK_LISTS and the entry, no stack trace", async () => {
    const started = Date.now()
    const { code, output } = await startExpectingFailure(env({ LISTMONK_API_USER: "checker", LISTMONK_API_TOKEN: "lm-token" }))
    expect(code).toBe(1)
    expect(output).toMatch(new RegExp(`Invalid configuration:\\n {2}- LISTMONK_LISTS: pt:${uuid(4)} is not among the lists LISTMONK_API_USER "checker" may read`))
    expect(output).not.toMatch(/\n\s+at |lm-token/)
    expect(Date.now() - started).toBeLessThan(15_000)
  })

  it("without one: it starts, and one warning says the lists are unchecked", async () => {
    const service = await spawnService(env())
    try {
      const warnings = service.output().split("\n").filter((line) => line.includes("LISTMONK_LISTS cannot be checked"))
      expect(warnings).toHaveLength(1)
      expect(JSON.parse(warnings[0]!)).toMatchObject({ level: "warn" })
    } finally {
      expect(await service.stop()).toBe(0)
    }
  })
})
