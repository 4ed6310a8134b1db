/**
 * The read-only live check (src/newsletter/liveCheck.ts) against the emulators: one call per configured
 * provider, nobody subscribed, and every refusal an `ok: false` with the provider's words, never a failure.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type BrevoEmulator, startBrevoEmulator, unrecognisedIpMessage } from "../../emulators/brevo.ts"
import { type ListmonkEmulator, startListmonkEmulator } from "../../emulators/listmonk.ts"
import { configFrom, type Env } from "../../support/config.ts"
import { upstreamHttp } from "../../support/upstream.ts"
import { liveCheck } from "../../../src/newsletter/liveCheck.ts"
import { readNewsletterConfig } from "../../../src/newsletter/NewsletterConfig.ts"

const check = (env: Env) =>
  Effect.runPromise(
    readNewsletterConfig.pipe(
      Effect.flatMap(liveCheck),
      Effect.provide(upstreamHttp),
      Effect.provide(configFrom({ NEWSLETTER_TIMEOUT_MS: "500", NEWSLETTER_DEADLINE_MS: "1000", ...env }))
    )
  )

describe("live check: Brevo", () => {
  let brevo: BrevoEmulator
  const env = (extra: Env = {}): Env => ({
    NEWSLETTER_PROVIDER: "brevo",
    BREVO_BASE_URL: brevo.url,
    BREVO_API_KEY: "live-key",
    BREVO_LIST_IDS: "7",
    BREVO_DOI_TEMPLATES: "es:11,en:12,fr:13,it:14,pt:15",
    BREVO_DOI_REDIRECT_URL: "https://landing.example/ok",
    ...extra
  })
  beforeAll(async () => {
    brevo = await startBrevoEmulator({ apiKey: "live-key" })
  })
  afterAll(() => brevo.close())

  it("the key accepted: one GET /v3/account with it, ok, nobody subscribed", async () => {
    brevo.reset()
    expect(await check(env())).toEqual([{ provider: "brevo", call: "GET /v3/account", ok: true, detail: "the key is accepted; plan free" }])
    expect(brevo.received().map((r) => [r.method, r.path, r.headers["api-key"]])).toEqual([["GET", "/v3/account", "live-key"]])
    expect(brevo.contacts().size).toBe(0)
  })

  it.each([
    ["a key Brevo does not know", () => {}, { BREVO_API_KEY: "other" }, "brevo answered 401 (unauthorized): Key not found"],
    ["its IP blocking on", () => brevo.setIpBlocking(true), {}, `brevo answered 401 (unauthorized): ${unrecognisedIpMessage("127.0.0.1")}`],
    ["a login page in between", () => brevo.setFault("html"), {}, "brevo answered 200 with a body that is not an account"],
    ["a 503, not retried", () => brevo.setFault("503"), {}, "brevo answered 503"]
  ] as const)("%s: ok false with what Brevo said", async (_, arrange, extra, detail) => {
    brevo.reset()
    arrange()
    expect(await check(env(extra))).toEqual([{ provider: "brevo", call: "GET /v3/account", ok: false, detail }])
    expect(brevo.received()).toHaveLength(1)
  })

  it("nobody listening: ok false, promptly", async () => {
    const gone = await startBrevoEmulator()
    await gone.close()
    const [result] = await check(env({ BREVO_BASE_URL: gone.url }))
    expect(result).toMatchObject({ provider: "brevo", ok: false, detail: expect.stringMatching(/ECONNREFUSED/) })
  })
})

describe("live check: Listmonk", () => {
  const LOCALES = ["es", "en", "fr", "it", "pt"] as const
  const uuid = (i: number) => `7a2b9c4d-1e3f-4a5b-9c6d-00000000004${i}`
  let listmonk: ListmonkEmulator
  const env = (extra: Env = {}): Env => ({
    NEWSLETTER_PROVIDER: "listmonk",
    LISTMONK_URL: listmonk.url,
    LISTMONK_LISTS: LOCALES.map((l, i) => `${l}:${uuid(i)}`).join(","),
    ...extra
  })
  const apiUser = { LISTMONK_API_USER: "reader", LISTMONK_API_TOKEN: "lm-live" }
  beforeAll(async () => {
    listmonk = await startListmonkEmulator({ lists: [0, 1, 2, 3, 4].map(uuid), apiUser: { user: "reader", token: "lm-live" } })
  })
  afterAll(() => listmonk.close())

  it("without an API user: the public lists, each configured one found", async () => {
    listmonk.reset()
    expect(await check(env())).toEqual([
      { provider: "listmonk", call: "GET /api/public/lists", ok: true, detail: "each list of LISTMONK_LISTS is there and public (5 read)" }
    ])
    expect(listmonk.received().map((r) => [r.method, r.path, r.headers.authorization])).toEqual([["GET", "/api/public/lists", undefined]])
  })

  it("with the API user: GET /api/lists with its token", async () => {
    listmonk.reset()
    const [result] = await check(env(apiUser))
    expect(result).toEqual({
      provider: "listmonk",
      call: "GET /api/lists?minimal=true&per_page=all",
      ok: true,
      detail: "each list of LISTMONK_LISTS is there and public (5 read)"
    })
    expect(listmonk.received()[0]?.headers.authorization).toBe("token reader:lm-live")
    expect(listmonk.subscribers().size).toBe(0)
  })

  it("a list gone private or deleted: ok false, each named", async () => {
    listmonk.setList({ uuid: uuid(3), type: "private", name: "Team" })
    listmonk.deleteList(uuid(4))
    try {
      const [admin] = await check(env(apiUser))
      expect(admin?.ok).toBe(false)
      expect(admin?.detail).toMatch(new RegExp(`LISTMONK_LISTS: it:${uuid(3)} \\("Team"\\) is a private list.*; LISTMONK_LISTS: pt:${uuid(4)} is not among`))
      const [open] = await check(env())
      expect(open?.detail).toMatch(new RegExp(`it:${uuid(3)} is not among the public lists.*pt:${uuid(4)} is not among the public lists`))
    } finally {
      listmonk.setList({ uuid: uuid(3), type: "public" })
      listmonk.setList(uuid(4))
    }
  })

  it("the token refused: ok false with Listmonk's words", async () => {
    const [result] = await check(env({ ...apiUser, LISTMONK_API_TOKEN: "old" }))
    expect(result).toMatchObject({ ok: false, detail: expect.stringMatching(/^LISTMONK_API_TOKEN: .*\(403: invalid API credentials\)/) })
  })

  it("the local list has nothing to call", async () => {
    expect(await check({ NEWSLETTER_PROVIDER: "local" })).toEqual([])
  })
})
