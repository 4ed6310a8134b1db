/**
 * POST /api/subscribe end to end: the HTTP app, the live Brevo and Listmonk Layers, and their
 * emulators over real HTTP (CONTRACT C5). What the provider received is checked byte for byte.
 */
import { Layer } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { brevoServiceEnv, type BrevoEmulator, startBrevoEmulator } from "../../emulators/brevo.ts"
import { type ListmonkEmulator, startListmonkEmulator } from "../../emulators/listmonk.ts"
import * as Newsletters from "../../../src/newsletter/layer.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { configFrom } from "../../support/config.ts"
import { expectProblem } from "../../support/problems.ts"
import { upstreamHttp } from "../../support/upstream.ts"

const locales = ["es", "en", "fr", "it", "pt"] as const
const templates = { es: 11, en: 12, fr: 13, it: 14, pt: 15 }
const listUuids = Object.fromEntries(locales.map((l, i) => [l, `0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a6${i}`]))

const live = (env: Record<string, string>) =>
  Newsletters.layer.pipe(Layer.provide(upstreamHttp), Layer.provide(configFrom({ NEWSLETTER_TIMEOUT_MS: "1000", NEWSLETTER_DEADLINE_MS: "3000", ...env })))

const subscribe = (app: TestApp, email: string, locale: string) =>
  fetch(`${app.url}/api/subscribe`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, locale })
  })

describe("Brevo", () => {
  let brevo: BrevoEmulator
  let app: TestApp
  beforeAll(async () => {
    brevo = await startBrevoEmulator({ host: "127.0.0.1", rejectEmails: ["fake@example.com"] })
    app = await startTestApp({
      newsletter: live({
        ...brevoServiceEnv(brevo.url)
      })
    })
  })
  afterAll(async () => {
    await app.close()
    await brevo.close()
  })
  beforeEach(() => {
    brevo.setFault("none")
    brevo.clear()
  })

  it("sends each locale's double opt-in template, list, LOCALE attribute and punycode domain", async () => {
    for (const locale of locales) {
      const res = await subscribe(app, `Reader.${locale}@Bücher.Example`, locale)
      expect(res.status).toBe(200)
      expect(await res.json()).toEqual({ success: true })
    }
    const received = brevo.received()
    expect(received).toHaveLength(5)
    received.forEach((r, i) => {
      const locale = locales[i]!
      expect(r.method).toBe("POST")
      expect(r.path).toBe("/v3/contacts/doubleOptinConfirmation")
      expect(r.headers["api-key"]).toBe("test-brevo-key")
      expect(r.body).toEqual({
        email: `Reader.${locale}@xn--bcher-kva.example`,
        includeListIds: [7],
        templateId: templates[locale],
        redirectionUrl: "https://www.example.com/confirmed",
        attributes: { LOCALE: locale }
      })
    })
  })

  it("answers 200 again for an address already subscribed", async () => {
    expect((await subscribe(app, "again@example.com", "en")).status).toBe(200)
    expect((await subscribe(app, "again@example.com", "en")).status).toBe(200)
  })

  it("answers a blocklisted contact (someone who unsubscribed) signing up again with the same 200", async () => {
    brevo.blocklist("unsubscribed@example.com")
    const res = await subscribe(app, "unsubscribed@example.com", "es")
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ success: true })
  })

  it("maps the provider's invalid-address verdict to 400 invalid_email", async () => {
    await expectProblem(await subscribe(app, "fake@example.com", "en"), 400, "invalid_email")
  })

  it.each(["500", "503", "429", "401", "403", "hang", "reset", "html", "garbage"] as const)(
    "maps provider fault %s to 502 upstream_error within the deadline",
    async (fault) => {
      brevo.setFault(fault)
      const started = Date.now()
      await expectProblem(await subscribe(app, `f.${fault}@example.com`, "it"), 502, "upstream_error")
      expect(Date.now() - started).toBeLessThan(5_000)
    },
    15_000
  )
})

describe("Listmonk", () => {
  let listmonk: ListmonkEmulator
  let app: TestApp
  beforeAll(async () => {
    listmonk = await startListmonkEmulator({ host: "127.0.0.1", lists: Object.values(listUuids) })
    app = await startTestApp({
      newsletter: live({
        NEWSLETTER_PROVIDER: "listmonk",
        LISTMONK_URL: listmonk.origin,
        LISTMONK_LISTS: locales.map((l) => `${l}:${listUuids[l]}`).join(",")
      })
    })
  })
  afterAll(async () => {
    await app.close()
    await listmonk.close()
  })

  it("subscribes to the locale's list through the public API", async () => {
    for (const locale of locales) expect((await subscribe(app, `l.${locale}@example.com`, locale)).status).toBe(200)
    const bodies = listmonk.received().map((r) => r.body as { email: string; list_uuids: Array<string> })
    expect(bodies.map((b) => b.list_uuids)).toEqual(locales.map((l) => [listUuids[l]]))
    expect(bodies.map((b) => b.email)).toEqual(locales.map((l) => `l.${l}@example.com`))
    expect((await subscribe(app, "l.es@example.com", "es")).status).toBe(200)
  })
})
