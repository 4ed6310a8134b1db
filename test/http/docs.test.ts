/**
 * The /docs page in headless Chromium (Debian's package, driven by playwright-core): it renders
 * offline from local assets and shows the three operations of the specification.
 */
import { existsSync } from "node:fs"
import { chromium, type Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "../support/app.ts"

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

let app: TestApp
let browser: Browser
beforeAll(async () => {
  if (!existsSync(executablePath)) {
    throw new Error(`Chromium not found at ${executablePath}: run the README set-up (apt-get install chromium)`)
  }
  app = await startTestApp()
  browser = await chromium.launch({
    executablePath,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
  })
}, 60_000)
afterAll(async () => {
  await browser?.close()
  await app?.close()
})

describe("GET /docs", () => {
  it("shows the three operations without any network but the service", async () => {
    const page = await browser.newPage()
    const foreign: Array<string> = []
    // Offline: anything not served by the service itself is refused, and noted.
    await page.route("**/*", (route) => {
      const url = route.request().url()
      if (url.startsWith(app.url) || url.startsWith("data:") || url.startsWith("blob:")) return route.continue()
      foreign.push(url)
      return route.abort()
    })
    await page.goto(`${app.url}/docs`, { waitUntil: "load" })
    const body = page.locator("body")
    // The sidebar renders before the operations' sections: wait for each, including a path.
    for (const text of [
      "Report service health",
      "Historical exchange rates for cryptocurrency symbols",
      "Subscribe an e-mail address to the newsletter",
      "/api/v1/exchange-rates"
    ]) {
      await expect.poll(async () => (await body.innerText()).includes(text), { timeout: 20_000 }).toBe(true)
    }
    expect(foreign.filter((u) => !/fonts|favicon/.test(u))).toEqual([])
    await page.close()
  }, 60_000)
})
