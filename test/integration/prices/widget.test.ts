/**
 * The widget (C10) in headless Chromium, embedded in a page of another origin (test/emulators/widgetPage.ts)
 * whose Content-Security-Policy allows scripts and connections to the API's origin only, styles from itself,
 * and requires Trusted Types: the service as `npm start` runs it (spawned) over the CoinGecko and Coinbase
 * emulators on the real clock. The first render is the cacheable GET's answer (names, prices, 24 h changes,
 * sparklines; the stream held back); then, live, the feed's ticks reach the page through the stream, rows
 * flash unless the reader prefers reduced motion, and screen readers hear a symbol at most every 30 s.
 * No CSP violation, no page error, no request to any other origin.
 */
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { startWidgetPage, type WidgetPage } from "../../emulators/widgetPage.ts"
import { launchChromium } from "../../support/chromium.ts"
import { type ServiceProcess, spawnService } from "../../support/spawn.ts"

interface RatesAnswer {
  readonly rates: ReadonlyArray<{ symbol: string; name: string; price: number; change: { "24h": number | null }; series: ReadonlyArray<[number, number]> }>
}

let coingecko: CoinGeckoEmulator
let coinbase: CoinbaseEmulator
let service: ServiceProcess
let page: WidgetPage
let browser: Browser
beforeAll(async () => {
  coingecko = await startCoinGeckoEmulator({ host: "127.0.0.1" })
  coinbase = await startCoinbaseEmulator({ host: "127.0.0.1" })
  service = await spawnService({
    COINGECKO_BASE_URL: coingecko.url,
    COINBASE_BASE_URL: coinbase.url,
    COINBASE_WS_URL: coinbase.wsUrl
  }, 30_000)
  page = await startWidgetPage({ api: service.url })
  browser = await launchChromium()
}, 90_000)
afterAll(async () => {
  await browser?.close()
  await page?.close()
  await service?.stop("SIGKILL")
  await coinbase?.close()
  await coingecko?.close()
})

/** What the page shows of its problems: CSP violations (its own event and the console's), page errors, foreign requests. */
interface Watched {
  readonly tab: Page
  readonly problems: Array<string>
  readonly violations: () => Promise<ReadonlyArray<string>>
}

const open = async (options: { readonly reducedMotion?: "reduce" | "no-preference"; readonly holdStream?: boolean } = {}): Promise<Watched> => {
  const context = await browser.newContext({ reducedMotion: options.reducedMotion ?? "no-preference" })
  const tab = await context.newPage()
  const problems: Array<string> = []
  tab.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
  tab.on("console", (message) => {
    if (/Content.Security.Policy|Trusted Type/i.test(message.text())) problems.push(`console: ${message.text()}`)
  })
  tab.on("request", (request) => {
    const url = request.url()
    if (!url.startsWith(page.url) && !url.startsWith(service.url)) problems.push(`request to another origin: ${url}`)
  })
  // Injected by the browser's debugger, outside the page's policy: the page itself could not run it.
  await tab.addInitScript(() => {
    const seen: Array<string> = []
    ;(window as unknown as { cspViolations: Array<string> }).cspViolations = seen
    document.addEventListener("securitypolicyviolation", (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`))
  })
  if (options.holdStream === true) await tab.route("**/api/v1/prices/stream*", (route) => route.abort())
  const response = await tab.goto(`${page.url}/`, { waitUntil: "load" })
  expect(response!.headers()["content-security-policy"]).toBe(page.contentSecurityPolicy)
  return {
    tab,
    problems,
    violations: () => tab.evaluate(() => (window as unknown as { cspViolations: Array<string> }).cspViolations)
  }
}

/** The digits of a formatted price, as a number ("$64,250.12" → 64250.12, "€3.200,50" is not used: lang="en"). */
const amount = (text: string) => Number(text.replace(/[^\d.]/g, ""))

describe("<crypto-prices> on a page of another origin, under script-src/connect-src of the API only", () => {
  it("renders the cacheable GET's answer: names, prices, 24 h changes and sparklines, themed, with no violation", async () => {
    const watched = await open({ holdStream: true })
    const { tab } = watched
    // The widget's own request, as sent and answered: the figures it must show.
    const answered = tab.waitForResponse((r) => r.url().startsWith(`${service.url}/api/v1/rates?`) && r.url().includes("currency=usd"))
    const rates = await answered
    expect(rates.status()).toBe(200)
    expect(new URL(rates.url()).search).toBe("?cryptos=BTC,ETH,SOL&currency=usd&days=30")
    expect(rates.headers()["cache-control"]).toMatch(/^public, max-age=\d+/)
    const answer = (await rates.json()) as RatesAnswer
    const widget = tab.locator("crypto-prices").first()
    for (const rate of answer.rates) {
      const row = widget.locator(`li[data-symbol="${rate.symbol}"]`)
      await expect.poll(() => row.locator(".name").textContent(), { timeout: 20_000 }).toBe(`${rate.name} ${rate.symbol}`)
      const price = await row.locator(".price").textContent()
      expect(price).toMatch(/^\$[\d,]+\.\d{2}$/)
      expect(amount(price!)).toBeCloseTo(rate.price, 2)
      const change = rate.change["24h"]!
      const shown = (await row.locator(".change").textContent())!.replace(" in 24 hours", "")
      expect(shown).toBe(`${change > 0 ? "+" : change < 0 ? "-" : ""}${Math.abs(change).toFixed(2)}%`)
      expect(await row.locator(".change").getAttribute("class")).toBe(`change ${change > 0 ? "up" : "down"}`)
      // One point of the polyline per day of the series, drawn in a box of some size.
      const points = (await row.locator("polyline").getAttribute("points"))!.split(" ")
      expect(points).toHaveLength(rate.series.length)
      const box = await row.locator("svg").boundingBox()
      expect(box!.width).toBeGreaterThan(20)
      expect(box!.height).toBeGreaterThan(10)
      expect(await row.locator("svg").getAttribute("aria-label")).toMatch(new RegExp(`^30-day trend of ${rate.name}: from \\$[\\d,.]+ to \\$[\\d,.]+$`))
    }
    expect(await widget.locator("li").count()).toBe(3)
    expect(await widget.locator(".attribution").textContent()).toMatch(/CoinGecko/)
    // The themed one: the page's custom properties reach into the shadow root (its style sheet is adopted, not inline).
    const themed = tab.locator("crypto-prices.dark")
    await expect.poll(() => themed.locator("li").count(), { timeout: 20_000 }).toBe(2)
    expect(await themed.locator("polyline").first().evaluate((line) => getComputedStyle(line).stroke)).toBe("rgb(56, 189, 248)")
    expect(await themed.evaluate((host) => getComputedStyle(host).backgroundColor)).toBe("rgb(15, 23, 42)")
    expect(await themed.locator(".price").first().textContent()).toMatch(/^€[\d,]+\.\d{2}$/)
    // Accessible: a list, and one polite live region that the first render leaves silent.
    expect(await widget.locator("ul").getAttribute("role")).toBe("list")
    expect(await widget.locator("[aria-live]").getAttribute("aria-live")).toBe("polite")
    expect(await widget.locator("[aria-live]").textContent()).toBe("")
    expect(await watched.violations()).toEqual([])
    expect(watched.problems).toEqual([])
    await tab.context().close()
  }, 60_000)

  it("shows a problem answer quietly: unknown symbols named, no row, no retry loop", async () => {
    const watched = await open()
    const { tab } = watched
    const refused = tab.waitForResponse((r) => r.url().includes("cryptos=NOPE1,NOPE2"))
    await tab.evaluate(() => {
      const widget = document.createElement("crypto-prices")
      widget.id = "none-known"
      widget.setAttribute("symbols", "NOPE1,NOPE2,bad symbol")
      document.body.append(widget)
    })
    expect((await refused).status()).toBe(400)
    const widget = tab.locator("#none-known")
    await expect.poll(() => widget.locator(".status").textContent(), { timeout: 20_000 }).toBe("No known symbol: NOPE1, NOPE2.")
    expect(await widget.locator(".note").textContent()).toBe("Unknown: BAD SYMBOL")
    expect(await widget.locator("li").count()).toBe(0)
    expect(await watched.violations()).toEqual([])
    expect(watched.problems).toEqual([])
    await tab.context().close()
  }, 60_000)
})
