/**
 * The live Brevo layer over real HTTP against the Brevo emulator: what Brevo receives for each
 * locale, and what each Brevo failure becomes, within a bounded time.
 */
import { Result } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { BlocklistedAnswers, type BrevoEmulator, type FaultMode, startBrevoEmulator, unrecognisedIpMessage } from "../../emulators/brevo.ts"
import type { Env } from "../../support/config.ts"
import { validateEmail } from "../../../src/newsletter/email.ts"
import type { Locale } from "../../../src/newsletter/Newsletter.ts"
import { LOCALES, type LiveNewsletter, liveNewsletter } from "./helpers.ts"

const KEY = "xkeysib-test-0123456789abcdef"
const REDIRECT = "https://landing.example/newsletter/confirmed/"
const TEMPLATES: Record<Locale, number> = { es: 11, en: 12, fr: 13, it: 14, pt: 15 }
const TIMEOUT_MS = 400
const DEADLINE_MS = 1500
const RETRIES = 2
/** Generous slack over the deadline for a loaded machine; still far below the 8 s production bound. */
const BOUND_MS = DEADLINE_MS + 2000

let emulator: BrevoEmulator
let newsletter: LiveNewsletter

const envFor = (url: string, extra: Env = {}): Env => ({
  NEWSLETTER_PROVIDER: "brevo",
  BREVO_BASE_URL: url,
  BREVO_API_KEY: KEY,
  BREVO_LIST_IDS: "7, 8",
  BREVO_DOI_TEMPLATES: "es:11,en:12,fr:13,it:14,pt:15",
  BREVO_DOI_REDIRECT_URL: REDIRECT,
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
  emulator = await startBrevoEmulator({
    apiKey: KEY,
    listIds: [7, 8],
    doiTemplates: Object.values(TEMPLATES),
    rejectEmails: ["bounce@example.com"]
  })
  newsletter = await liveNewsletter(envFor(emulator.url))
})
afterAll(async () => {
  await newsletter.dispose()
  await emulator.close()
})
afterEach(() => emulator.reset())

describe("Brevo: what the provider receives", () => {
  it.each(LOCALES)("locale %s: DOI call with that locale's template, the lists, LOCALE and the api-key", async (locale) => {
    const email = normalised(`Ana.${locale.toUpperCase()}@Bücher.Example`)
    expect(email).toBe(`Ana.${locale.toUpperCase()}@xn--bcher-kva.example`)

    const result = await newsletter.subscribe({ email, locale })

    expect(result).toMatchObject({ ok: true, outcome: "pending" })
    const received = emulator.received()
    expect(received).toHaveLength(1)
    const [request] = received
    expect(request?.method).toBe("POST")
    expect(request?.path).toBe("/v3/contacts/doubleOptinConfirmation")
    expect(request?.headers["api-key"]).toBe(KEY)
    expect(request?.headers["content-type"]).toMatch(/^application\/json/)
    expect(request?.body).toEqual({
      email,
      includeListIds: [7, 8],
      templateId: TEMPLATES[locale],
      redirectionUrl: REDIRECT,
      attributes: { LOCALE: locale }
    })
    expect(emulator.contacts().get(email.toLowerCase())?.attributes).toEqual({ LOCALE: locale })
  })

  it("re-subscription: 204 from Brevo → existing", async () => {
    const email = "repeat@example.com"
    expect(await newsletter.subscribe({ email, locale: "en" })).toMatchObject({ ok: true, outcome: "pending" })
    expect(await newsletter.subscribe({ email, locale: "en" })).toMatchObject({ ok: true, outcome: "existing" })
    expect(await newsletter.subscribe({ email, locale: "fr" })).toMatchObject({ ok: true, outcome: "existing" })
    expect(emulator.received()).toHaveLength(3)
    expect(emulator.contacts().get(email)?.attributes).toEqual({ LOCALE: "fr" })
  })
})

describe("Brevo: failures", () => {
  it("Brevo calls the address invalid → NewsletterInvalidEmail, not retried", async () => {
    const result = await newsletter.subscribe({ email: "bounce@example.com", locale: "es" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterInvalidEmail", reason: "email is not valid" })
    expect(emulator.received()).toHaveLength(1)
  })

  it.each(Object.keys(BlocklistedAnswers) as ReadonlyArray<keyof typeof BlocklistedAnswers>)(
    "a blocklisted contact signing up again (Brevo's %s answer) → existing, like a known one, logged neutrally",
    async (answer) => {
      const blocking = await startBrevoEmulator({ apiKey: KEY, listIds: [7, 8], doiTemplates: Object.values(TEMPLATES), blocklistedAnswer: answer })
      const client = await liveNewsletter(envFor(blocking.url))
      try {
        blocking.blocklist("Left.Once@example.com")
        const result = await client.subscribe({ email: "Left.Once@example.com", locale: "fr" })
        expect(result).toMatchObject({ ok: true, outcome: "existing" })
        expect(blocking.received()).toHaveLength(1)
        const logs = client.logs().join("\n")
        expect(logs).toContain("L***@example.com")
        expect(logs).not.toContain("Left.Once")
        expect(logs).toMatch(/brevo keeps the address on file/)
      } finally {
        await client.dispose()
        await blocking.close()
      }
    }
  )

  it("Brevo refusing our IP address (its IP blocking) → NewsletterUpstreamError with Brevo's message, logged", async () => {
    emulator.setIpBlocking(true)
    const result = await newsletter.subscribe({ email: "ip@example.com", locale: "es" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
    if (!result.ok) expect(result.reason).toBe(`brevo answered 401 (unauthorized): ${unrecognisedIpMessage("127.0.0.1")}`)
    expect(emulator.received()).toHaveLength(1)
    const logs = newsletter.logs().join("\n")
    expect(logs).toContain("unrecognised IP address 127.0.0.1")
    expect(logs).not.toMatch(/key was refused/)
  })

  it("an address Brevo's own syntax check refuses → NewsletterInvalidEmail", async () => {
    const result = await newsletter.subscribe({ email: "not-an-address", locale: "es" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterInvalidEmail" })
  })

  /** mode → requests Brevo should see (retries only for transient failures) and words in the reason. */
  const faults: ReadonlyArray<readonly [FaultMode, number, RegExp]> = [
    ["500", 1 + RETRIES, /500/],
    ["503", 1 + RETRIES, /503/],
    ["reset", 1 + RETRIES, /connection failed/],
    ["429", 1, /429.*rate limited/],
    // Brevo's own words, not a guess at the cause (an unknown IP is a 401 too).
    ["401", 1, /^brevo answered 401 \(unauthorized\): Key not found$/],
    ["403", 1, /^brevo answered 403 \(permission_denied\): Your account is not allowed to use this endpoint$/],
    ["html", 1, /200/],
    ["garbage", 1, /not JSON/]
  ]
  it.each(faults)("fault %s → NewsletterUpstreamError after %i request(s), promptly", async (mode, requests, reason) => {
    emulator.setFault(mode)
    const result = await newsletter.subscribe({ email: "fault@example.com", locale: "it" })
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
    // Each attempt timed out and was retried while the deadline allowed.
    expect(emulator.received().length).toBeGreaterThanOrEqual(2)
  })

  it("slower than the attempt timeout → NewsletterUpstreamError within the deadline", async () => {
    emulator.setFault({ mode: "slow", delayMs: 5_000 })
    const result = await newsletter.subscribe({ email: "slow@example.com", locale: "es" })
    expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
    if (!result.ok) expect(result.reason).toMatch(/within/)
    expect(result.ms).toBeLessThan(BOUND_MS)
  })

  it("slow but within the attempt timeout → success", async () => {
    const patient = await liveNewsletter(envFor(emulator.url, { NEWSLETTER_TIMEOUT_MS: "1500", NEWSLETTER_DEADLINE_MS: "3000" }))
    try {
      emulator.setFault({ mode: "slow", delayMs: 150 })
      const result = await patient.subscribe({ email: "patient@example.com", locale: "es" })
      expect(result).toMatchObject({ ok: true, outcome: "pending" })
      expect(result.ms).toBeGreaterThanOrEqual(140)
      expect(emulator.received()).toHaveLength(1)
    } finally {
      await patient.dispose()
    }
  })

  it.each(["503", "500", "reset"] as const)("a transient %s is retried and the retry succeeds", async (mode) => {
    emulator.setFault({ mode, times: 1 })
    const result = await newsletter.subscribe({ email: `retry-${mode}@example.com`, locale: "en" })
    expect(result).toMatchObject({ ok: true, outcome: "pending" })
    const received = emulator.received()
    expect(received).toHaveLength(2)
    // The retry is the same idempotent call.
    expect(received[1]?.body).toEqual(received[0]?.body)
  })

  it("a template Brevo does not know (our configuration's fault) → NewsletterUpstreamError, not invalid_email", async () => {
    const other = await startBrevoEmulator({ apiKey: KEY, listIds: [7, 8], doiTemplates: [11, 12, 13, 14] })
    const client = await liveNewsletter(envFor(other.url))
    try {
      const result = await client.subscribe({ email: "pt@example.com", locale: "pt" })
      expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
      if (!result.ok) expect(result.reason).toMatch(/400 \(invalid_parameter\)/)
      expect(await client.subscribe({ email: "es@example.com", locale: "es" })).toMatchObject({ ok: true })
    } finally {
      await client.dispose()
      await other.close()
    }
  })

  it("a list Brevo does not have → NewsletterUpstreamError", async () => {
    const client = await liveNewsletter(envFor(emulator.url, { BREVO_LIST_IDS: "7,99" }))
    try {
      const result = await client.subscribe({ email: "lists@example.com", locale: "es" })
      expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
      if (!result.ok) expect(result.reason).toMatch(/404 \(document_not_found\)/)
    } finally {
      await client.dispose()
    }
  })

  it("our key is wrong → NewsletterUpstreamError, one request", async () => {
    const client = await liveNewsletter(envFor(emulator.url, { BREVO_API_KEY: "xkeysib-wrong" }))
    try {
      const result = await client.subscribe({ email: "key@example.com", locale: "es" })
      expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
      if (!result.ok) expect(result.reason).toMatch(/401 \(unauthorized\)/)
      expect(emulator.received()).toHaveLength(1)
    } finally {
      await client.dispose()
    }
  })

  it("nobody listening → NewsletterUpstreamError promptly", async () => {
    const gone = await startBrevoEmulator()
    const url = gone.url
    await gone.close()
    const client = await liveNewsletter(envFor(url))
    try {
      const result = await client.subscribe({ email: "refused@example.com", locale: "es" })
      expect(result).toMatchObject({ ok: false, tag: "NewsletterUpstreamError" })
      if (!result.ok) expect(result.reason).toMatch(/ECONNREFUSED/)
      expect(result.ms).toBeLessThan(BOUND_MS)
    } finally {
      await client.dispose()
    }
  })

  it("with NEWSLETTER_RETRIES=0 a 503 is not repeated", async () => {
    const client = await liveNewsletter(envFor(emulator.url, { NEWSLETTER_RETRIES: "0" }))
    try {
      emulator.setFault("503")
      expect(await client.subscribe({ email: "once@example.com", locale: "es" })).toMatchObject({ ok: false })
      expect(emulator.received()).toHaveLength(1)
    } finally {
      await client.dispose()
    }
  })

  it("log lines mask the address and never contain the key", async () => {
    emulator.setFault("500")
    await newsletter.subscribe({ email: "Secret.Person@example.com", locale: "es" })
    const logs = newsletter.logs().join("\n")
    expect(logs).toContain("S***@example.com")
    expect(logs).toContain("brevo subscribe failed")
    expect(logs).not.toContain("Secret.Person")
    expect(logs).not.toContain(KEY)
  })
})
