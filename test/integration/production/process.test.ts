/**
 * The whole process: start-up validation, SIGTERM draining, the metrics listener.
 */
import { afterAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { createServer } from "node:http"
import { childEnv, freePort, OFFLINE_UPSTREAMS, type ServiceProcess, spawnService, startExpectingFailure, tempDataDir } from "../../support/spawn.ts"

const running: Array<ServiceProcess> = []
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop("SIGKILL")))
})

describe("start-up configuration", () => {
  it("names every bad variable and exits 1", async () => {
    const { code, output } = await startExpectingFailure({ PORT: "http", TRUST_PROXY: "maybe", TOKEN_TTL_SECONDS: "-5" })
    expect(code).toBe(1)
    expect(output).toMatch(/PORT: expected an integer/)
    expect(output).toMatch(/TRUST_PROXY: expected true or false/)
    expect(output).toMatch(/TOKEN_TTL_SECONDS: expected an integer/)
    expect(output).not.toMatch(/\n\s+at /) // a message, not a stack trace
  })

  it("takes any printable APP_ENV as the health environment (C2: free text)", async () => {
    for (const APP_ENV of ["eu-canary-2", "preview-123"]) {
      const service = await spawnService({ APP_ENV })
      running.push(service)
      const health = await (await fetch(`${service.url}/api/health`)).json()
      expect(health.environment).toBe(APP_ENV)
      expect(await service.stop()).toBe(0)
    }
  }, 60_000)

  it("refuses an APP_ENV with control characters, blank or too long, naming APP_ENV", async () => {
    for (const APP_ENV of ["eu\u0007canary", "  ", "x".repeat(65)]) {
      const { code, output } = await startExpectingFailure({ APP_ENV })
      expect(code).toBe(1)
      expect(output).toMatch(/APP_ENV: expected printable text of 1 to 64 characters/)
      expect(output).not.toMatch(/\n\s+at /)
    }
  }, 60_000)

  it("refuses the local newsletter list in production, saying which variable to set", async () => {
    const { code, output } = await startExpectingFailure({ APP_ENV: "production" })
    expect(code).toBe(1)
    expect(output).toMatch(/NEWSLETTER_PROVIDER/)
  })

  it("refuses signing keys and a pepper generated on the fly in production", async () => {
    const { code, output } = await startExpectingFailure({
      APP_ENV: "production",
      NEWSLETTER_PROVIDER: "listmonk",
      LISTMONK_URL: "http://127.0.0.1:9",
      LISTMONK_LISTS: "es:0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a61,en:0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a62,fr:0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a63,it:0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a64,pt:0b6f8f3e-6a1c-4c9e-9b7e-2f1d3c4b5a65"
    })
    expect(code).toBe(1)
    expect(output).toMatch(/OAUTH_SIGNING_KEYS: required in production/)
    expect(output).toMatch(/OAUTH_SECRET_PEPPER: required in production/)
  })
})

describe("start-up", () => {
  it("answers requests that arrive while it starts instead of leaving them hanging", async () => {
    const port = await freePort()
    const child = spawn(process.execPath, ["src/main.ts"], {
      env: { ...childEnv, HOST: "127.0.0.1", PORT: String(port), DATA_DIR: tempDataDir(), ...OFFLINE_UPSTREAMS },
      stdio: "ignore"
    })
    try {
      const outcomes: Array<string | number> = []
      const deadline = Date.now() + 20_000 // start-up on a loaded 2-core machine can take seconds
      while (Date.now() < deadline && !outcomes.includes(200)) {
        outcomes.push(
          await fetch(`http://127.0.0.1:${port}/api/health`, { signal: AbortSignal.timeout(5_000) }).then(
            (r) => r.status,
            (e: Error) => (e.name === "TimeoutError" ? "hung" : "refused")
          )
        )
        if (outcomes.at(-1) === "refused") await new Promise((r) => setTimeout(r, 2))
      }
      expect(outcomes).toContain(200)
      expect(outcomes).not.toContain("hung")
    } finally {
      child.kill("SIGKILL")
    }
  })
})

describe("SIGTERM", () => {
  it("completes every accepted request, then exits 0", async () => {
    const service = await spawnService({})
    running.push(service)
    const inFlight = Array.from({ length: 200 }, () =>
      fetch(`${service.url}/api/health`).then((r) => r.status, () => "refused" as const)
    )
    await new Promise((r) => setTimeout(r, 5))
    const exit = service.stop("SIGTERM")
    const statuses = await Promise.all(inFlight)
    expect(await exit).toBe(0)
    // Every request either completed with 200 or was never accepted (connection refused after close).
    expect(statuses.every((s) => s === 200 || s === "refused")).toBe(true)
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0)
  })
})

describe("metrics", () => {
  it("serves Prometheus text on METRICS_PORT, off the public port", async () => {
    const metricsPort = await freePort()
    const service = await spawnService({ METRICS_PORT: String(metricsPort), RATE_LIMIT_SUBSCRIBE_PER_MIN: "2" })
    running.push(service)
    await fetch(`${service.url}/api/health`)
    await fetch(`${service.url}/nope`)
    await fetch(`${service.url}/api/v1/exchange-rates`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } })
    // Against an upstream that is not there: an upstream call (failed) and cache misses are counted.
    await fetch(`${service.url}/api/v1/exchange-rates`, { method: "POST", body: "{\"cryptos\":[\"BTC\"]}", headers: { "content-type": "application/json" } })
    for (let i = 0; i < 3; i++) await fetch(`${service.url}/api/subscribe`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } })
    const publicMetrics = await fetch(`${service.url}/metrics`)
    expect(publicMetrics.status).toBe(404)
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
    expect(text).toMatch(/# TYPE http_requests_total counter/)
    expect(text).toMatch(/http_requests_total\{[^}]*route="\/api\/health"[^}]*status="200"[^}]*\} 1/)
    expect(text).toMatch(/http_requests_total\{[^}]*route="unmatched"[^}]*status="404"[^}]*\} 2/) // /nope and the public /metrics
    expect(text).toMatch(/http_request_duration_seconds_bucket\{[^}]*route="\/api\/v1\/exchange-rates"/)
    expect(text).toMatch(/# TYPE upstream_calls_total counter/)
    expect(text).toMatch(/# TYPE cache_lookups_total counter/)
    expect(text).toMatch(/# TYPE rate_limit_rejections_total counter/)
  })
})

describe("OpenTelemetry", () => {
  it("exports request spans over OTLP/HTTP to the configured collector", async () => {
    const received: Array<{ path: string; body: string }> = []
    const collector = createServer((req, res) => {
      let body = ""
      req.on("data", (c) => (body += c))
      req.on("end", () => {
        received.push({ path: req.url ?? "", body })
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    await new Promise<void>((r) => collector.listen(0, "127.0.0.1", r))
    const { port } = collector.address() as { port: number }
    try {
      const service = await spawnService({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` })
      running.push(service)
      await fetch(`${service.url}/api/health`)
      await expect.poll(() => received.filter((r) => r.path === "/v1/traces").length, { timeout: 10_000, interval: 200 })
        .toBeGreaterThan(0)
      const traces = received.filter((r) => r.path === "/v1/traces").map((r) => r.body).join("")
      expect(traces).toContain("crypto-landing-api")
      expect(traces).toMatch(/http\.server|GET/)
      // The request log still goes to stdout.
      expect(service.output()).toMatch(/"path":"\/api\/health"/)
    } finally {
      collector.close()
    }
  })
})
