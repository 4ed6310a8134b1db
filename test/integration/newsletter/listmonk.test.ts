/**
 * The live Listmonk layer over real HTTP against the Listmonk emulator.
 */
import { Result } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type FaultMode, type ListmonkEmulator, type ListmonkList, startListmonkEmulator } from "../../emulators/listmonk.ts"
import type { Env } from "../../support/config.ts"
import { validateEmail } from "../../../src/newsletter/email.ts"
import type { Locale } from "../../../src/newsletter/Newsletter.ts"
import { buildError, LOCALES, type LiveNewsletter, liveNewsletter } from "./helpers.ts"

const LISTS: Record<Locale, string> = {
  es: "0b7e3f5c-1a2b-4c3d-8e4f-000000000001",
  en: "0b7e3f5c-1a2b-4c3d-8e4f-000000000002",
  fr: "0b7e3f5c-1a2b-4c3d-8e4f-000000000003",
  it: "0b7e3f5c-1a2b-4c3d-8e4f-000000000004",
  pt: "0b7e3f5c-1a2b-4c3d-8e4f-000000000005"
}
const TIMEOUT_MS = 400
const DEADLINE_MS = 1500
const RETRIES = 2
/** Generous slack over the deadline for a loaded machine; still far below the 8 s production bound. */
const BOUND_MS = DEADLINE_MS + 2000

let emulator: ListmonkEmulator
let newsletter: LiveNewsletter

const envFor = (url: string, extra: Env = {}): Env => ({
  NEWSLETTER_PROVIDER: "listmonk",
  LISTMONK_URL: url,
  LISTMONK_LISTS: LOCALES.map((l) => `${l}:${LISTS[l]}`).join(","),
  NEWSLETTER_TIMEOUT_MS: String(TIMEOUT_MS),
  NEWSLETTER_DEADLINE_MS: String(DEADLINE_MS),
  NEWSLETTER_RETRIES: String(RETRIES),
  ...extra
})

const normalised = (address: string): string => {
  const result = validateEmail(address)
  if (Result.isFailure(result)) throw new Error(`test address rejected: ${result.failure}`)
  return result.success
}

beforeAll(async () => {
  emulator = await startListmonkEmulator({ lists: Object.values(LISTS), blocklistDomains: ["blocked.example"] })
  newsletter = await liveNewsletter(envFor(emulator.url))
})
afterAll(async () => {
  await newsletter.dispose()
  await emulator.close()
})
afterEach(() => emulator.reset())

describe("Listmonk: what the provider receives", () => {
  it.each(LOCALES)("locale %s: public subscription to that locale's list", async (locale) => {
    const email = normalised(`Zoe.${locale}@Example.РФ`)
    expect(email).toBe(`Zoe.${locale}@example.xn--p1ai`)

    const result = await newsletter.subscribe({ email, locale })

    expect(result).toMatchObject({ ok: true, outcome: "pending" })
    const received = emulator.received()
    expect(received).toHaveLength(1)
    const [request] = received
    expect(request?.method).toBe("POST")
    expect(request?.path).toBe("/api/public/subscription")
    expect(request?.headers["content-type"]).toMatch(/^application\/json/)
    expect(request?.body).toEqual({ email, name: `Zoe.${locale}`, list_uuids: [LISTS[locale]] })
    expect(emulator.subscribers().get(email.toLowerCase())?.lists).toEqual([LISTS[locale]])
  })

  it("re-subscription: has_optin false → existing, and the new locale's list is added", async () => {
    const email = "again@example.com"
    expect(await newsletter.subscribe({ email, locale: "es" })).toMatchObject({ ok: true, outcome: "pending" })
    expect(await newsletter.subscribe({ email, locale: "es" })).toMatchObject({ ok: true, outcome: "existing" })
    expect(await newsletter.subscribe({ email, locale: "it" })).toMatchObject({ ok: true, outcome: "existing" })
    expect(emulator.subscribers().get(email)?.lists).toEqual([LISTS.es, LISTS.it])
  })
})

describe("Listmonk: failures", () => {
  it("\"Invalid email.\" → NewsletterInvalidEmail, not retried", async () => {
    const result = await newsletter.subscribe({ email: "no-at-sign", locale: "en" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterInvalidEmail", reason: "Invalid email." })
    expect(emulator.received()).toHaveLength(1)
  })

  it("\"The e-mail domain is blocklisted.\" → NewsletterInvalidEmail", async () => {
    const result = await newsletter.subscribe({ email: "someone@blocked.example", locale: "en" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterInvalidEmail", reason: "The e-mail domain is blocklisted." })
  })

  const faults: ReadonlyArray<readonly [FaultMode, number, RegExp]> = [
    ["500", 1 + RETRIES, /500/],
    ["503", 1 + RETRIES, /503/],
    ["reset", 1 + RETRIES, /connection failed/],
    ["429", 1, /429.*rate limited/],
    ["401", 1, /401.*access refused/],
    ["403", 1, /403.*access refused/],
    ["html", 1, /200 with an unexpected body/],
    ["garbage", 1, /200 with an unexpected body/]
  ]
  it.each(faults)("fault %s → NewsletterUpstreamError after %i request(s), promptly", async (mode, requests, reason) => {
    emulator.setFault(mode)
    const result = await newsletter.subscribe({ email: "fault@example.com", locale: "fr" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
    if (!result.ok) expect(result.reason).toMatch(reason)
    expect(emulator.received()).toHaveLength(requests)
    expect(result.ms).toBeLessThan(BOUND_MS)
  })

  it("hang → NewsletterUpstreamError at the deadline, not later", async () => {
    emulator.setFault("hang")
    const result = await newsletter.subscribe({ email: "hang@example.com", locale: "pt" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
    expect(result.ms).toBeGreaterThanOrEqual(TIMEOUT_MS)
    expect(result.ms).toBeLessThan(BOUND_MS)
  })

  it("slower than the attempt timeout → NewsletterUpstreamError within the deadline", async () => {
    emulator.setFault({ mode: "slow", delayMs: 5_000 })
    const result = await newsletter.subscribe({ email: "slow@example.com", locale: "es" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
    expect(result.ms).toBeLessThan(BOUND_MS)
  })

  it("a transient 502-class failure is retried and the retry succeeds", async () => {
    emulator.setFault({ mode: "503", times: 2 })
    const result = await newsletter.subscribe({ email: "retry@example.com", locale: "en" })
    expect(result).toMatchObject({ ok: true, outcome: "pending" })
    expect(emulator.received()).toHaveLength(3)
  })

  it("public subscription disabled (a configuration problem) → NewsletterUpstreamError", async () => {
    const closed = await startListmonkEmulator({ lists: Object.values(LISTS), publicSubscription: false })
    const client = await liveNewsletter(envFor(closed.url))
    try {
      const result = await client.subscribe({ email: "x@example.com", locale: "es" })
      expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
      if (!result.ok) expect(result.reason).toMatch(/That feature is not available/)
    } finally {
      await client.dispose()
      await closed.close()
    }
  })

  it("a list Listmonk does not have: 200 has_optin false and the address in no list, nothing to see per call", async () => {
    const partial = await startListmonkEmulator({ lists: [LISTS.es] })
    const client = await liveNewsletter(envFor(partial.url))
    try {
      expect(await client.subscribe({ email: "x@example.com", locale: "es" })).toMatchObject({ ok: true, outcome: "pending" })
      // Indistinguishable from an address already on file: only the start-up check can find the list missing.
      expect(await client.subscribe({ email: "y@example.com", locale: "en" })).toMatchObject({ ok: true, outcome: "existing" })
      expect(partial.subscribers().get("y@example.com")?.lists).toEqual([])
    } finally {
      await client.dispose()
      await partial.close()
    }
  })

  it("log lines mask the address", async () => {
    emulator.setFault("403")
    await newsletter.subscribe({ email: "Private.Reader@example.com", locale: "es" })
    const logs = newsletter.logs().join("\n")
    expect(logs).toContain("P***@example.com")
    expect(logs).not.toContain("Private.Reader")
  })
})

describe("Listmonk: the lists checked at start-up with an API user (LISTMONK_API_USER, LISTMONK_API_TOKEN)", () => {
  const USER = { user: "checker", token: "lm-secret-token" }
  const withUser = (url: string, extra: Env = {}) =>
    envFor(url, { LISTMONK_API_USER: USER.user, LISTMONK_API_TOKEN: USER.token, ...extra })
  const running: Array<ListmonkEmulator> = []
  /** An instance holding these lists, its API user as configured unless told. */
  const started = async (lists: ReadonlyArray<ListmonkList | string>, apiUser = USER) => {
    const e = await startListmonkEmulator({ lists, apiUser })
    running.push(e)
    return e
  }
  afterAll(async () => {
    await Promise.all(running.map((e) => e.close()))
  })

  it("every list there and public (whatever its opt-in): built after one GET /api/lists with the token", async () => {
    const lm = await started([...Object.values(LISTS).slice(1), { uuid: LISTS.es, optin: "single" }])
    expect(await buildError(withUser(lm.url))).toBeUndefined()
    const received = lm.received()
    expect(received).toHaveLength(1)
    expect(received[0]).toMatchObject({ method: "GET", path: "/api/lists?minimal=true&per_page=all" })
    expect(received[0]?.headers.authorization).toBe(`token ${USER.user}:${USER.token}`)
  })

  it("a list that does not exist: the start is refused naming LISTMONK_LISTS and the locale's entry", async () => {
    const lm = await started(Object.values(LISTS).filter((u) => u !== LISTS.en))
    const message = await buildError(withUser(lm.url))
    expect(message).toMatch(/^Invalid configuration:\n/)
    expect(message).toContain(`LISTMONK_LISTS: en:${LISTS.en} is not among the lists LISTMONK_API_USER "checker" may read`)
    expect(message?.split("\n")).toHaveLength(2)
    expect(message).not.toContain(USER.token)
  })

  it("a private list and a missing one: both named at once", async () => {
    const lm = await started([LISTS.es, LISTS.en, LISTS.fr, { uuid: LISTS.it, name: "Staff", type: "private" }])
    const message = await buildError(withUser(lm.url))
    expect(message).toContain(`LISTMONK_LISTS: it:${LISTS.it} ("Staff") is a private list`)
    expect(message).toContain(`LISTMONK_LISTS: pt:${LISTS.pt} is not among`)
  })

  it("an instance without any list (Listmonk answers \"data\": []): every locale named", async () => {
    const lm = await started([])
    const message = await buildError(withUser(lm.url))
    for (const locale of LOCALES) expect(message).toContain(`LISTMONK_LISTS: ${locale}:${LISTS[locale]} is not among`)
  })

  it("a token Listmonk refuses: the start is refused naming LISTMONK_API_TOKEN, with Listmonk's words", async () => {
    const lm = await started(Object.values(LISTS), { user: "checker", token: "another" })
    const message = await buildError(withUser(lm.url))
    expect(message).toMatch(/^Invalid configuration:\n {2}- LISTMONK_API_TOKEN: Listmonk at http:\/\/127\.0\.0\.1:\d+ refused LISTMONK_API_USER "checker" and this token \(403: invalid API credentials\)/)
    expect(message).not.toContain(USER.token)
  })

  it.each([
    ["503", 1 + RETRIES, /answered 503/],
    ["hang", undefined, /within|deadline/],
    ["html", 1, /200 with a body that is not Listmonk's lists/]
  ] as const)("Listmonk answering %s: the start is refused naming LISTMONK_URL, within the deadline", async (mode, requests, reason) => {
    const lm = await started(Object.values(LISTS))
    lm.setFault(mode)
    const began = performance.now()
    const message = await buildError(withUser(lm.url))
    expect(performance.now() - began).toBeLessThan(BOUND_MS)
    expect(message).toMatch(/^LISTMONK_URL: /)
    expect(message).toMatch(reason)
    expect(message).toContain("start Listmonk or fix LISTMONK_URL")
    if (requests !== undefined) expect(lm.received()).toHaveLength(requests)
  })

  it("nobody listening at LISTMONK_URL: refused promptly, naming it", async () => {
    const gone = await startListmonkEmulator()
    await gone.close()
    const began = performance.now()
    const message = await buildError(withUser(gone.url))
    expect(performance.now() - began).toBeLessThan(BOUND_MS)
    expect(message).toMatch(/^LISTMONK_URL: Listmonk at http:\/\/127\.0\.0\.1:\d+ could not be read \(connection failed: ECONNREFUSED\)/)
  })

  it("a 503 once is retried, and the start goes on", async () => {
    const lm = await started(Object.values(LISTS))
    lm.setFault({ mode: "503", times: 1 })
    expect(await buildError(withUser(lm.url))).toBeUndefined()
    expect(lm.received()).toHaveLength(2)
  })

  it("without an API user: built without asking Listmonk, one warning that the lists are unchecked", async () => {
    const lm = await started([])
    const client = await liveNewsletter(envFor(lm.url))
    try {
      const warnings = client.logs().filter((line) => line.includes("LISTMONK_LISTS cannot be checked"))
      expect(warnings).toHaveLength(1)
      expect(JSON.parse(warnings[0]!).level).toBe("WARN")
      expect(lm.received()).toEqual([])
    } finally {
      await client.dispose()
    }
  })
})
