/**
 * `npm run smoke:live` (src/cli/smokeLive.ts, issue 32, point 5) kept working without the internet: run as
 * a process against the strict emulators (their base URLs as the variables): every kind of call the
 * service makes answered and read, exit 0; a provider refusing (CoinGecko's key, Brevo's IP check) or a
 * feed whose ticks do not read, a REFUSED line naming it, exit 1.
 */
import { spawn } from "node:child_process"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { brevoServiceEnv, type BrevoEmulator, startBrevoEmulator } from "../../emulators/brevo.ts"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../../emulators/coingecko.ts"
import { childEnv } from "../../support/spawn.ts"

let coingecko: CoinGeckoEmulator
let coinbase: CoinbaseEmulator
let brevo: BrevoEmulator
beforeAll(async () => {
  ;[coingecko, coinbase, brevo] = await Promise.all([
    startCoinGeckoEmulator({ host: "127.0.0.1", requireKey: "cg-key" }),
    startCoinbaseEmulator({ host: "127.0.0.1", feed: { tickEveryMs: 200, heartbeatEveryMs: 200 } }),
    startBrevoEmulator({ host: "127.0.0.1" })
  ])
})
afterAll(async () => {
  await Promise.all([coingecko?.close(), coinbase?.close(), brevo?.close()])
})

const smoke = (env: Record<string, string> = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["src/cli/smokeLive.ts", "--feed-seconds", "2"], {
      env: {
        ...childEnv,
        COINGECKO_BASE_URL: coingecko.url,
        COINGECKO_API_KEY: "cg-key",
        COINBASE_BASE_URL: coinbase.url,
        COINBASE_WS_URL: coinbase.wsUrl,
        ...brevoServiceEnv(brevo.url),
        ...env
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c) => (stdout += c))
    child.stderr.on("data", (c) => (stderr += c))
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })

const lines = (stdout: string) => stdout.trim().split("\n")

describe("npm run smoke:live against the emulators", () => {
  it("makes one call of each kind the service makes, reads each answer, reads the feed; exit 0", async () => {
    coingecko.resetStats()
    const run = await smoke()
    expect(run.code, run.stdout + run.stderr).toBe(0)
    const report = lines(run.stdout)
    expect(report.at(-1)).toBe("11 calls, 0 refused or unreadable")
    for (const call of [
      "GET /simple/supported_vs_currencies",
      "GET /coins/list",
      "GET /coins/markets?ids=bitcoin",
      "GET /coins/bitcoin/market_chart/range",
      "GET /products/BTC-USD/candles",
      "GET /products/BTC-USD/ticker",
      "WebSocket ws://",
      "GET /v3/account"
    ]) expect(report.find((line) => line.includes(call)), call).toMatch(/^ok /)
    expect(report.find((line) => line.includes("WebSocket"))).toMatch(/[1-9]\d* ticks/)
    // With the key, and the service's own User-Agent.
    expect(Object.keys(coingecko.stats().callers.byUserAgent)).toEqual([expect.stringMatching(/^crypto-landing-api\/\d/)])
    expect(brevo.received().filter((r) => r.method !== "GET")).toEqual([])
  }, 30_000)

  it("a refusal or an unreadable answer is a REFUSED line with the provider's words, and exit 1", async () => {
    coingecko.setFault({ mode: "401", paths: ["/coins/list"] })
    coinbase.setFeed("numeric-ticks")
    try {
      const run = await smoke({ BREVO_API_KEY: "another-key" })
      expect(run.code).toBe(1)
      const report = lines(run.stdout)
      expect(report.find((line) => line.includes("GET /coins/list"))).toMatch(/^REFUSED .*coins\/list|^REFUSED .*key/i)
      expect(report.find((line) => line.includes("GET /coins/markets?ids=bitcoin"))).toMatch(/^ok /)
      expect(report.find((line) => line.includes("WebSocket"))).toMatch(/^REFUSED .*unreadable ticker\.price/)
      expect(report.find((line) => line.includes("GET /v3/account"))).toMatch(/^REFUSED /)
      expect(report.at(-1)).toBe("11 calls, 3 refused or unreadable")
    } finally {
      coingecko.setFault("none")
      coinbase.setFeed("normal")
    }
  }, 30_000)
})
