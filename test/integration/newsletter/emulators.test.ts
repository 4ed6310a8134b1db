/**
 * The emulators themselves, spoken to with plain fetch: documented answers, recording, the control
 * endpoint, and standalone running.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { createInterface } from "node:readline"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BlocklistedAnswers, type BrevoEmulator, startBrevoEmulator, unrecognisedIpMessage } from "../../emulators/brevo.ts"
import { type ListmonkEmulator, startListmonkEmulator } from "../../emulators/listmonk.ts"

const ROOT = path.resolve(import.meta.dirname, "../../..")
const LIST = "0b7e3f5c-1a2b-4c3d-8e4f-000000000001"

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })

describe("Brevo emulator", () => {
  let brevo: BrevoEmulator
  const doi = () => `${brevo.url}/contacts/doubleOptinConfirmation`
  const valid = { email: "a@example.com", includeListIds: [7], templateId: 11, redirectionUrl: "https://x.example/ok" }
  beforeAll(async () => {
    brevo = await startBrevoEmulator({ apiKey: "k" })
  })
  afterAll(() => brevo.close())

  it("listens on 127.0.0.1 on an ephemeral port with the /v3 base path", () => {
    expect(brevo.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v3$/)
    expect(brevo.port).toBeGreaterThan(0)
  })

  it("checks the api-key first", async () => {
    const res = await post(doi(), valid, { "api-key": "not-k" })
    expect(res.status).toBe(401)
    expect(await res.json()).toEqual({ code: "unauthorized", message: "Key not found" })
  })

  it("without an api-key header: 401 saying so", async () => {
    const res = await post(doi(), valid)
    expect(res.status).toBe(401)
    expect(await res.json()).toEqual({ message: "authentication not found in headers", code: "unauthorized" })
  })

  it("a blocklisted contact signing up again: 400 already associated; nothing changes", async () => {
    brevo.blocklist("Gone@Example.com")
    const res = await post(doi(), { ...valid, email: "gone@example.com" }, { "api-key": "k" })
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual(BlocklistedAnswers.unableToCreate)
    expect(brevo.contacts().has("gone@example.com")).toBe(false)
    expect((await post(`${brevo.origin}/__control`, { blocklist: "other@example.com" })).status).toBe(204)
    expect((await post(doi(), { ...valid, email: "other@example.com" }, { "api-key": "k" })).status).toBe(400)
    expect((await post(`${brevo.origin}/__control`, { blocklist: 7 })).status).toBe(400)
    brevo.reset()
    expect((await post(doi(), { ...valid, email: "gone@example.com" }, { "api-key": "k" })).status).toBe(201)
  })

  it("IP blocking on: 401 naming the caller's address, after the key is checked; off again", async () => {
    brevo.setIpBlocking(true)
    const res = await post(doi(), valid, { "api-key": "k" })
    expect(res.status).toBe(401)
    expect(await res.json()).toEqual({ code: "unauthorized", message: unrecognisedIpMessage("127.0.0.1") })
    expect((await (await post(doi(), valid, { "api-key": "wrong" })).json()).message).toBe("Key not found")
    expect((await fetch(`${brevo.url}/account`, { headers: { "api-key": "k" } })).status).toBe(401)
    expect((await post(`${brevo.origin}/__control`, { ipBlocking: false })).status).toBe(204)
    expect((await post(doi(), valid, { "api-key": "k" })).status).not.toBe(401)
    expect((await post(`${brevo.origin}/__control`, { ipBlocking: true })).status).toBe(204)
    expect((await post(doi(), valid, { "api-key": "k" })).status).toBe(401)
    brevo.reset()
  })

  it("GET /v3/account: the account with the key, 401 without", async () => {
    const res = await fetch(`${brevo.url}/account`, { headers: { "api-key": "k" } })
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ email: expect.any(String), plan: [{ type: "free" }] })
    expect((await fetch(`${brevo.url}/account`)).status).toBe(401)
    expect((await post(`${brevo.url}/account`, {}, { "api-key": "k" })).status).toBe(405)
  })

  it("201 for a new contact, 204 for a known one, both with an empty body", async () => {
    const created = await post(doi(), valid, { "api-key": "k" })
    expect(created.status).toBe(201)
    expect(await created.text()).toBe("")
    const updated = await post(doi(), { ...valid, email: "A@Example.com" }, { "api-key": "k" })
    expect(updated.status).toBe(204)
  })

  it.each([
    [{ ...valid, email: undefined }, "missing_parameter", "email is missing"],
    [{ ...valid, templateId: undefined }, "missing_parameter", "templateId is missing"],
    [{ ...valid, redirectionUrl: undefined }, "missing_parameter", "redirectionUrl is missing"],
    [{ ...valid, email: "nope" }, "invalid_parameter", "email is not valid"],
    [{ ...valid, templateId: 99 }, "invalid_parameter", "templateId is not a valid double opt-in template"],
    [{ ...valid, redirectionUrl: "not a url" }, "invalid_parameter", "redirectionUrl is not valid"]
  ])("400 for %j", async (body, code, message) => {
    const res = await post(doi(), body, { "api-key": "k" })
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ code, message })
  })

  it("records exactly what it received", async () => {
    brevo.clear()
    await post(`${doi()}?x=1`, { ...valid, attributes: { LOCALE: "es" } }, { "api-key": "k", "x-extra": "1" })
    const [request] = brevo.received()
    expect(request).toMatchObject({
      method: "POST",
      path: "/v3/contacts/doubleOptinConfirmation?x=1",
      body: { ...valid, attributes: { LOCALE: "es" } }
    })
    expect(request?.headers["api-key"]).toBe("k")
    expect(request?.headers["x-extra"]).toBe("1")
  })

  it("429 carries x-sib-ratelimit-* and no Retry-After; a fault with times runs out", async () => {
    brevo.setFault({ mode: "429", times: 1 })
    const limited = await post(doi(), valid, { "api-key": "k" })
    expect(limited.status).toBe(429)
    expect(limited.headers.get("x-sib-ratelimit-remaining")).toBe("0")
    expect(limited.headers.get("x-sib-ratelimit-reset")).not.toBeNull()
    expect(limited.headers.get("retry-after")).toBeNull()
    expect((await post(doi(), valid, { "api-key": "k" })).status).toBe(204)
  })

  it("control endpoint: set a fault, read what was received, reset", async () => {
    brevo.reset()
    expect((await post(`${brevo.origin}/__control`, { fault: "500" })).status).toBe(204)
    expect((await post(doi(), valid, { "api-key": "k" })).status).toBe(500)
    const received = await (await fetch(`${brevo.origin}/__received`)).json()
    expect(received).toHaveLength(1)
    expect(received[0].body).toEqual(valid)
    expect((await post(`${brevo.origin}/__control`, { reset: true })).status).toBe(204)
    expect(await (await fetch(`${brevo.origin}/__received`)).json()).toEqual([])
    // reset also forgot the contact: it is new again
    expect((await post(doi(), valid, { "api-key": "k" })).status).toBe(201)
    expect((await post(`${brevo.origin}/__control`, { fault: "explode" })).status).toBe(400)
  })

  it("reset fault drops the connection", async () => {
    brevo.setFault({ mode: "reset", times: 1 })
    await expect(post(doi(), valid, { "api-key": "k" })).rejects.toThrow()
  })
})

describe("Listmonk emulator", () => {
  let listmonk: ListmonkEmulator
  const sub = () => `${listmonk.url}/api/public/subscription`
  const PRIVATE = "0b7e3f5c-1a2b-4c3d-8e4f-00000000000f"
  const SINGLE = "0b7e3f5c-1a2b-4c3d-8e4f-0000000000a1"
  const ARCHIVED = "0b7e3f5c-1a2b-4c3d-8e4f-0000000000a2"
  const UNKNOWN = "0b7e3f5c-1a2b-4c3d-8e4f-0000000000ff"
  const token = { authorization: "token checker:s3cret:with-colon" }
  const lists = (query = "", headers: Record<string, string> = token) => fetch(`${listmonk.url}/api/lists${query}`, { headers })
  beforeAll(async () => {
    listmonk = await startListmonkEmulator({
      lists: [
        { uuid: LIST, name: "Newsletter ES" },
        { uuid: PRIVATE, name: "Staff", type: "private" },
        { uuid: SINGLE, name: "Newsletter EN", optin: "single" },
        { uuid: ARCHIVED, name: "Old", status: "archived" }
      ],
      apiUser: { user: "checker", token: "s3cret:with-colon" }
    })
  })
  afterAll(() => listmonk.close())

  it("200 has_optin true for a new subscriber, false once on file", async () => {
    const first = await post(sub(), { email: "n@example.com", name: "", list_uuids: [LIST] })
    expect(first.status).toBe(200)
    expect(await first.json()).toEqual({ data: { has_optin: true } })
    const again = await post(sub(), { email: "N@example.com", list_uuids: [LIST] })
    expect(await again.json()).toEqual({ data: { has_optin: false } })
  })

  it.each([
    [{ email: "bad", list_uuids: [LIST] }, "Invalid email."],
    [{ email: "a@example.com", list_uuids: [] }, "No valid lists selected to subscribe."],
    [{ email: "a@example.com", list_uuids: [PRIVATE] }, "Invalid UUID(s)"],
    [{ email: "a@example.com", list_uuids: [LIST, PRIVATE] }, "Invalid UUID(s)"],
    [{ email: "a@example.com", name: "x".repeat(201), list_uuids: [LIST] }, "Invalid name."]
  ])("400 for %j", async (body, message) => {
    const res = await post(sub(), body)
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ message })
  })

  it("an unknown list's UUID: 200 has_optin false, the address on file in no list (cmd/public.go)", async () => {
    const res = await post(sub(), { email: "lost@example.com", list_uuids: [UNKNOWN] })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ data: { has_optin: false } })
    expect(listmonk.subscribers().get("lost@example.com")?.lists).toEqual([])
    // Beside a list that exists, the unknown one is skipped alike.
    expect(await (await post(sub(), { email: "half@example.com", list_uuids: [UNKNOWN, LIST] })).json()).toEqual({ data: { has_optin: true } })
    expect(listmonk.subscribers().get("half@example.com")?.lists).toEqual([LIST])
  })

  it("a list deleted while it runs is unknown from then on", async () => {
    const GONE = "0b7e3f5c-1a2b-4c3d-8e4f-0000000000b1"
    listmonk.setList(GONE)
    expect(await (await post(sub(), { email: "d1@example.com", list_uuids: [GONE] })).json()).toEqual({ data: { has_optin: true } })
    expect((await post(`${listmonk.origin}/__control`, { deleteList: GONE })).status).toBe(204)
    expect(await (await post(sub(), { email: "d2@example.com", list_uuids: [GONE] })).json()).toEqual({ data: { has_optin: false } })
  })

  it("GET /api/public/lists: the public active lists, no credentials needed", async () => {
    const res = await fetch(`${listmonk.url}/api/public/lists`)
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual([{ uuid: LIST, name: "Newsletter ES" }, { uuid: SINGLE, name: "Newsletter EN" }])
  })

  it("GET /api/lists?minimal=true with an API user's token: every list with its type, optin and status", async () => {
    const res = await lists("?minimal=true&per_page=all")
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body.data).toMatchObject({ total: 4, page: 1, per_page: 4 })
    expect(body.data.results.map((l: { uuid: string; type: string; optin: string; status: string }) => [l.uuid, l.type, l.optin, l.status])).toEqual([
      [LIST, "public", "double", "active"],
      [PRIVATE, "private", "double", "active"],
      [SINGLE, "public", "single", "active"],
      [ARCHIVED, "public", "double", "archived"]
    ])
    // Basic authentication is still taken (Listmonk keeps it for older clients).
    const basic = await lists("?minimal=true", { authorization: `Basic ${Buffer.from("checker:s3cret:with-colon").toString("base64")}` })
    expect(basic.status).toBe(200)
  })

  it("GET /api/lists pages (per_page, page, default 20), searches names (query) and filters (type)", async () => {
    const page2 = await (await lists("?per_page=1&page=2")).json()
    expect(page2.data).toMatchObject({ total: 4, per_page: 1, page: 2, results: [{ uuid: PRIVATE }] })
    expect((await (await lists("")).json()).data).toMatchObject({ per_page: 20, page: 1, total: 4 })
    expect((await (await lists("?query=newsletter")).json()).data.results.map((l: { uuid: string }) => l.uuid)).toEqual([LIST, SINGLE])
    expect((await (await lists("?type=private")).json()).data.results.map((l: { uuid: string }) => l.uuid)).toEqual([PRIVATE])
  })

  it.each([
    [{ authorization: "token checker:wrong" }, "invalid API credentials"],
    [{ authorization: "token nobody:s3cret:with-colon" }, "invalid API credentials"],
    [{}, "invalid session"],
    [{ authorization: "Bearer abc" }, "code=400, message=unknown Authorization scheme"],
    [{ authorization: "token checker" }, "code=400, message=api_key:token missing"],
    [{ authorization: "token :x" }, "code=400, message=empty `api_key` or `token`"]
  ])("the admin API refuses %j with 403 %j, as Listmonk's auth middleware does", async (headers, message) => {
    const res = await lists("?minimal=true", headers)
    expect(res.status).toBe(403)
    expect(await res.json()).toEqual({ message })
  })

  it("without an API user configured, every token is refused", async () => {
    const bare = await startListmonkEmulator({ lists: [LIST] })
    try {
      const res = await fetch(`${bare.url}/api/lists`, { headers: token })
      expect(res.status).toBe(403)
      expect(await res.json()).toEqual({ message: "invalid API credentials" })
      // An instance with no list at all: Listmonk's minimal answer is an empty array, not a page.
      const empty = await startListmonkEmulator({ apiUser: { user: "u", token: "t" } })
      try {
        expect(await (await fetch(`${empty.url}/api/lists?minimal=true`, { headers: { authorization: "token u:t" } })).json()).toEqual({ data: [] })
      } finally {
        await empty.close()
      }
    } finally {
      await bare.close()
    }
  })

  it("html and garbage faults answer 200 with a body that is not the API's", async () => {
    listmonk.setFault({ mode: "html", times: 1 })
    const html = await post(sub(), { email: "h@example.com", list_uuids: [LIST] })
    expect(html.status).toBe(200)
    expect(html.headers.get("content-type")).toMatch(/text\/html/)
    listmonk.setFault({ mode: "garbage", times: 1 })
    const garbage = await post(sub(), { email: "g@example.com", list_uuids: [LIST] })
    expect(garbage.status).toBe(200)
    const text = await garbage.text()
    expect(() => JSON.parse(text)).toThrow()
  })
})

describe("standalone", () => {
  it.each([
    ["brevo", "test/emulators/brevo.ts", /\/v3$/],
    ["listmonk", "test/emulators/listmonk.ts", /:\d+$/]
  ])("node %s --port 0 announces its URL and answers until SIGTERM", async (name, file, urlShape) => {
    const child = spawn(process.execPath, [path.join(ROOT, file), "--port", "0"], { cwd: ROOT })
    try {
      const lines = createInterface({ input: child.stdout })
      const first = await new Promise<string>((resolve, reject) => {
        lines.once("line", resolve)
        child.once("exit", (code) => reject(new Error(`exited with ${code}`)))
      })
      const announced = JSON.parse(first) as { emulator: string; url: string; control: string }
      expect(announced.emulator).toBe(name)
      expect(announced.url).toMatch(urlShape)
      const received = await fetch(announced.control.replace("/__control", "/__received"))
      expect(await received.json()).toEqual([])
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      expect(await exited).toBe(0)
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL")
    }
  })
})
