/**
 * The /docs page in headless Chromium (Debian's package, driven by playwright-core): with its
 * Content-Security-Policy enforced it renders the three operations of the specification from the
 * service alone (offline), shows the contract's examples, and offers none of Scalar's hosted features.
 */
import type { Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "../../support/app.ts"
import { launchChromium } from "../../support/chromium.ts"

let app: TestApp
let browser: Browser
beforeAll(async () => {
  app = await startTestApp()
  browser = await launchChromium()
}, 60_000)
afterAll(async () => {
  await browser?.close()
  await app?.close()
})

describe("GET /docs", () => {
  it("shows the three operations and their examples, with nothing but the service, under its CSP", async () => {
    const page = await browser.newPage()
    const foreign: Array<string> = []
    const problems: Array<string> = []
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
    page.on("console", (message) => {
      // Scalar's first render names its web fonts before our options apply; the policy blocks them (no
      // request leaves the page, see `foreign`). Any other refusal would be a policy that breaks the page.
      if (/Content Security Policy/.test(message.text()) && !/Loading the font 'https:\/\/fonts\.scalar\.com\//.test(message.text())) {
        problems.push(message.text())
      }
    })
    // Offline: anything not served by the service itself is refused, and noted.
    await page.route("**/*", (route) => {
      const url = route.request().url()
      if (url.startsWith(app.url) || url.startsWith("data:") || url.startsWith("blob:")) return route.continue()
      foreign.push(url)
      return route.abort()
    })
    const response = await page.goto(`${app.url}/docs`, { waitUntil: "load" })
    expect(response!.headers()["content-security-policy"]).toMatch(/script-src 'self'/)
    const body = page.locator("body")
    // The sidebar renders before the operations' sections: wait for each, including a path.
    for (const text of [
      "Report service health",
      "Historical exchange rates for cryptocurrency symbols",
      "Subscribe an e-mail address to the newsletter",
      "/api/v1/exchange-rates",
      // The contract's examples, not values made up from the schemas.
      "ada.lovelace@example.com",
      "99850.12"
    ]) {
      await expect.poll(async () => (await body.innerText()).includes(text), { timeout: 20_000 }).toBe(true)
    }
    const text = await body.innerText()
    expect(text).not.toMatch(/9007199254740991|Generate SDKs|\bShare\b|Encoded\b/)
    expect(foreign).toEqual([])
    expect(problems).toEqual([])
    await page.close()
  }, 60_000)
})
