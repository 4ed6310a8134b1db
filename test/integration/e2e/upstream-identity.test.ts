/**
 * Issue 32, point 1: every call to a provider says who it is, and our trace context stays at home
 * (CONTRACT C2 `UPSTREAM_USER_AGENT`, C9 "Calls to providers"). The service as shipped (`node
 * src/main.ts`) against the emulators, traces exported to a collector of ours: CoinGecko, Coinbase's REST
 * API and its feed's upgrade, Brevo and Listmonk each see the default User-Agent
 * `crypto-landing-api/<package.json version> (+<PUBLIC_BASE_URL>)`, or the one configured, and never a
 * `traceparent` or `b3` header, while the collector does receive our spans.
 *
 * Before (ae86018): undici's client sent no User-Agent and both trace headers; CoinGecko answers such a
 * call 403 and Coinbase 400, so every rates request of a production deployment failed.
 */
import { readFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { brevoServiceEnv, type BrevoEmulator, startBrevoEmulator } from "../../emulators/brevo.ts"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { type ListmonkEmulator, startListmonkEmulator } from "../../emulators/listmonk.ts"
import { type ServiceProcess, spawnService } from "../../support/spawn.ts"

const version = (JSON.parse(readFileSync("package.json", "utf8")) as { version: string }).version
const LIST = "0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a60"

let coingecko: CoinGeckoEmulator
let coinbase: CoinbaseEmulator
let brevo: BrevoEmulator
let listmonk: ListmonkEmulator
/** Our own OTLP collector: trace requests it received. */
let collector: Server
let exported = 0

beforeAll(async () => {
  ;[coingecko, coinbase, brevo, listmonk] = await Promise.all([
    startCoinGeckoEmulator({ host: "127.0.0.1" }),
    startCoinbaseEmulator({ host: "127.0.0.1", rateLimit: false }),
    startBrevoEmulator({ host: "127.0.0.1" }),
    startListmonkEmulator({ host: "127.0.0.1", lists: [LIST] })
  ])
  collector = createServer((req, res) => {
    if (req.url?.endsWith("/v1/traces") === true) exported++
    req.resume()
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"))
  })
  await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve))
})
afterAll(async () => {
  await Promise.all([coingecko?.close(), coinbase?.close(), brevo?.close(), listmonk?.close()])
  collector?.close()
})

/** The service against every emulator, with `env` on top; its traces exported to our collector. */
const start = (env: Record<string, string>) =>
  spawnService({
    COINGECKO_BASE_URL: coingecko.url,
    COINBASE_BASE_URL: coinbase.url,
    COINBASE_WS_URL: coinbase.wsUrl,
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
    ...env
  })

/** One call of each kind the service makes: rates (CoinGecko, Coinbase's REST and feed) and a sign-up. */
const callEverything = async (service: ServiceProcess) => {
  const rates = await fetch(`${service.url}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ cryptos: ["BTC", "PEPE"], days: 7 })
  })
  expect(rates.status).toBe(200)
  const signUp = await fetch(`${service.url}/api/subscribe`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: "reader@example.com", locale: "es" })
  })
  expect(signUp.status).toBe(200)
  // The feed's connection is opened once the product list is held: wait for its upgrade.
  for (let i = 0; i < 100 && Object.keys(coinbase.stats().feed.callers.byUserAgent).length === 0; i++) await new Promise((r) => setTimeout(r, 50))
}

const resetAll = () => {
  coingecko.resetStats()
  coinbase.resetStats()
  brevo.clear()
  listmonk.clear()
}

const userAgentsSeen = () => ({
  coingecko: coingecko.stats().callers,
  coinbase: coinbase.stats().callers,
  feed: coinbase.stats().feed.callers,
  newsletter: [...brevo.received(), ...listmonk.received()].map((r) => ({
    agent: r.headers["user-agent"],
    traced: r.headers.traceparent !== undefined || r.headers.b3 !== undefined
  }))
})

describe("issue 32 (1): every call to a provider says who it is", () => {
  it("by default crypto-landing-api/<version> (+PUBLIC_BASE_URL), on CoinGecko, Coinbase REST and feed, Brevo; no trace header leaves", async () => {
    resetAll()
    const service = await start({
      PUBLIC_BASE_URL: "https://api.example.com",
      ...brevoServiceEnv(brevo.url)
    })
    try {
      await callEverything(service)
      const expected = `crypto-landing-api/${version} (+https://api.example.com)`
      const seen = userAgentsSeen()
      for (const source of [seen.coingecko, seen.coinbase, seen.feed]) {
        expect(Object.keys(source.byUserAgent)).toEqual([expected])
        expect(source.traced).toBe(0)
      }
      expect(seen.newsletter.length).toBeGreaterThan(0)
      expect(seen.newsletter).toEqual(seen.newsletter.map(() => ({ agent: expected, traced: false })))
      // Tracing was on: the spans went to our collector, only the headers stayed home.
      for (let i = 0; i < 100 && exported === 0; i++) await new Promise((r) => setTimeout(r, 50))
      expect(exported).toBeGreaterThan(0)
    } finally {
      await service.stop()
    }
  })

  it("UPSTREAM_USER_AGENT replaces it everywhere, Listmonk included", async () => {
    resetAll()
    const agent = "acme-rates/2.1 (+https://acme.example/contact)"
    const service = await start({
      UPSTREAM_USER_AGENT: agent,
      NEWSLETTER_PROVIDER: "listmonk",
      LISTMONK_URL: listmonk.url,
      LISTMONK_LISTS: ["es", "en", "fr", "it", "pt"].map((locale) => `${locale}:${LIST}`).join(",")
    })
    try {
      await callEverything(service)
      const seen = userAgentsSeen()
      for (const source of [seen.coingecko, seen.coinbase, seen.feed]) expect(source.byUserAgent).toEqual({ [agent]: expect.any(Number) })
      expect(seen.newsletter).toEqual(seen.newsletter.map(() => ({ agent, traced: false })))
      expect(seen.newsletter.length).toBeGreaterThan(0)
    } finally {
      await service.stop()
    }
  })
})
