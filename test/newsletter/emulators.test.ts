/**
 * The emulators themselves, spoken to with plain fetch: documented answers, recording, the control
 * endpoint, and standalone running.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { createInterface } from "node:readline"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type BrevoEmulator, startBrevoEmulator } from "../emulators/brevo.ts"
import { type ListmonkEmulator, startListmonkEmulator } from "../emulators/listmonk.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")
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
    const res = await post(doi(), valid)
    expect(res.status).toBe(401)
    expect(await res.json()).toEqual({ code: "unauthorized", message: "Key not found" })
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
  beforeAll(async () => {
    listmonk = await startListmonkEmulator({ lists: [LIST, { uuid: "0b7e3f5c-1a2b-4c3d-8e4f-00000000000f", type: "private" }] })
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
    [{ email: "a@example.com", list_uuids: ["0b7e3f5c-1a2b-4c3d-8e4f-00000000000f"] }, "Invalid UUID(s)"],
    [{ email: "a@example.com", name: "x".repeat(201), list_uuids: [LIST] }, "Invalid name."]
  ])("400 for %j", async (body, message) => {
    const res = await post(sub(), body)
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ message })
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
