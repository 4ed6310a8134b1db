/**
 * `npm run demo`: the whole service offline. Starts the CoinGecko-, Coinbase- (REST and WebSocket feed)
 * and Brevo-compatible emulators, registers a demo OAuth client, starts the service against them and
 * prints what to try, with a page of another origin (the next port) embedding the price widget under a strict
 * Content-Security-Policy (widgetPage.ts).
 *   --port N           service port (default 3000)
 *   --smoke            run one request per endpoint, print the statuses and exit (0 when all are as expected)
 *   --credits-spent    CoinGecko answers 429 to everything, as when the month's credits are spent: majors
 *                      are answered from the second source (Coinbase Exchange), `source: "coinbase"`
 * Everything listens on 127.0.0.1 only; data goes to a fresh temporary DATA_DIR.
 * A port already in use is reported before anything else is printed or started (exit 1): the demo
 * never shows credentials for, or smoke-tests, a service it did not start.
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, writeSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { brevoServiceEnv, startBrevoEmulator } from "./brevo.ts"
import { startCoinbaseEmulator } from "./coinbase.ts"
import { startCoinGeckoEmulator } from "./coingecko.ts"
import { startWidgetPage, type WidgetPage } from "./widgetPage.ts"

const stop = (code: number, message: string): never => {
  writeSync(2, `demo: ${message}\n`)
  process.exit(code)
}

const args = process.argv.slice(2)
const smoke = args.includes("--smoke")
const creditsSpent = args.includes("--credits-spent")
const portArg = args.indexOf("--port")
const port = portArg < 0 ? 3000 : Number(args[portArg + 1])
if (!Number.isInteger(port) || port < 1 || port > 65535) stop(2, "--port needs a port number (1-65535)")
const base = `http://127.0.0.1:${port}`

/** Resolves with why the port cannot be listened on, or undefined when it is free. */
const portProblem = (host: string, p: number) =>
  new Promise<string | undefined>((resolve) => {
    const probe = createServer()
    probe.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "EADDRINUSE" ? "taken" : `unusable (${e.code})`))
    probe.listen({ port: p, host, exclusive: true }, () => probe.close(() => resolve(undefined)))
  })

const problem = await portProblem("127.0.0.1", port)
if (problem !== undefined) {
  stop(1, `port ${port} is ${problem} on 127.0.0.1: another program (another demo?) listens there. ` +
    `Stop it, or pick another port: npm run demo -- --port ${port === 3000 ? 3001 : port + 1}`)
}

const coingecko = await startCoinGeckoEmulator({ host: "127.0.0.1" })
// CoinGecko refuses every call for an hour, as it does once a key's monthly credits are spent.
if (creditsSpent) coingecko.setFault({ mode: "429", retryAfterSeconds: 3_600 })
const coinbase = await startCoinbaseEmulator({ host: "127.0.0.1" })
const brevo = await startBrevoEmulator({ host: "127.0.0.1" })
const dataDir = mkdtempSync(join(tmpdir(), "crypto-api-demo-"))
// Offline and self-contained, whatever the shell exports: one process, its state in memory and the
// temporary DATA_DIR, never a Redis or PostgreSQL it would share with something else.
const { REDIS_URL: _redis, DATABASE_URL: _database, WEB_CONCURRENCY: _workers, OTEL_EXPORTER_OTLP_ENDPOINT: _otlp, ...shell } = process.env
const env = {
  ...shell,
  PORT: String(port),
  HOST: "127.0.0.1",
  PUBLIC_BASE_URL: base,
  DATA_DIR: dataDir,
  COINGECKO_BASE_URL: coingecko.url,
  COINBASE_BASE_URL: coinbase.url,
  // Coinbase Exchange's public feed, live quotes (CONTRACT C2, C4 "Live quotes"): the emulator's.
  COINBASE_WS_URL: coinbase.wsUrl,
  ...brevoServiceEnv(brevo.url, `${base}/docs`)
}

// Synchronous, so that nothing printed is lost when the process exits right after.
const say = (line: string) => writeSync(1, `${line}\n`)
let service: ReturnType<typeof spawn> | undefined
let widgetPage: WidgetPage | undefined
let stopping = false
const shutdown = async (code: number) => {
  if (stopping) return
  stopping = true
  if (service !== undefined && service.exitCode === null) {
    service.kill("SIGTERM")
    await new Promise((resolve) => service!.once("exit", resolve))
  }
  await Promise.all([coingecko.close(), coinbase.close(), brevo.close(), widgetPage?.close()])
  process.exit(code)
}
process.on("SIGINT", () => void shutdown(0))
process.on("SIGTERM", () => void shutdown(0))

const created = spawnSync(process.execPath, ["src/cli/clients.ts", "create", "--name", "demo", "--scope", "health:read rates:read subscriptions:write"], { env, encoding: "utf8" })
if (created.status !== 0) {
  writeSync(2, created.stderr)
  await shutdown(1)
}
const client = JSON.parse(created.stdout) as { client_id: string; client_secret: string }

// Ready means: this child said it listens. A health answer alone could come from someone else's server.
service = spawn(process.execPath, ["src/main.ts"], { env, stdio: ["ignore", "pipe", "inherit"] })
const listening = new Promise<boolean>((resolve) => {
  let seen = ""
  service!.stdout!.on("data", (chunk: Buffer) => {
    if (!smoke) process.stdout.write(chunk)
    if (seen !== "done") {
      seen += chunk.toString()
      if (seen.includes("Listening on")) {
        seen = "done"
        resolve(true)
      }
    }
  })
  service!.once("exit", () => resolve(false))
})
service.once("exit", (code) => {
  if (stopping) return
  writeSync(2, `demo: the service exited with ${code}\n`)
  void shutdown(code ?? 1)
})
const ready = await Promise.race([listening, new Promise<false>((r) => setTimeout(() => r(false), 20_000))])
if (!ready) {
  writeSync(2, "demo: the service did not start listening\n")
  await shutdown(1)
}

const basic = Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString("base64")
if (smoke) {
  const json = { "content-type": "application/json" }
  // With CoinGecko refusing everything its coin index is not held, so only curated symbols resolve.
  const ratesQuery = creditsSpent ? { cryptos: ["BTC", "ETH"], days: 7 } : { cryptos: ["BTC", "ETH", "FOO"], days: 7 }
  const checks: Array<[string, Promise<Response>, number]> = [
    ["GET /api/health", fetch(`${base}/api/health`), 200],
    ["POST /api/v1/exchange-rates", fetch(`${base}/api/v1/exchange-rates`, { method: "POST", headers: json, body: JSON.stringify(ratesQuery) }), 200],
    ["POST /api/subscribe", fetch(`${base}/api/subscribe`, { method: "POST", headers: json, body: JSON.stringify({ email: "demo@example.com", locale: "es" }) }), 200],
    ["POST /oauth/token", fetch(`${base}/oauth/token`, { method: "POST", headers: { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded" }, body: "grant_type=client_credentials" }), 200],
    ["GET /.well-known/oauth-authorization-server", fetch(`${base}/.well-known/oauth-authorization-server`), 200],
    ["GET /docs", fetch(`${base}/docs`), 200],
    ["GET /widget.js", fetch(`${base}/widget.js`), 200]
  ]
  let ok = true
  for (const [name, response, expected] of checks) {
    const answered = await response.then((r) => r, () => undefined)
    const status = answered?.status ?? 0
    ok &&= status === expected
    say(`${status === expected ? "ok  " : "FAIL"} ${status} ${name}`)
    if (name.includes("exchange-rates") && answered !== undefined && status === 200) {
      // Credits spent: Coinbase's whole. Else the series are CoinGecko's, the prices live from Coinbase's
      // feed once it is followed (right after start-up, CoinGecko's).
      const { rates, source } = (await answered.json()) as { source: string; rates: ReadonlyArray<{ sources: { price: string; series: string } }> }
      const expected = creditsSpent ? source === "coinbase" : rates.every((rate) => rate.sources.series === "coingecko")
      ok &&= expected
      const prices = [...new Set(rates.map((rate) => rate.sources.price))].join(", ")
      say(`${expected ? "ok  " : "FAIL"} source ${source} (prices: ${prices}; series: ${[...new Set(rates.map((rate) => rate.sources.series))].join(", ")})`)
    }
  }
  say(`brevo emulator received ${brevo.received().length} request(s)`)
  await shutdown(ok ? 0 : 1)
} else {
  // Another origin for the widget's page: the next port, or any free one when that is taken.
  const pagePort = port < 65535 && (await portProblem("127.0.0.1", port + 1)) === undefined ? port + 1 : 0
  widgetPage = await startWidgetPage({ api: base, host: "127.0.0.1", port: pagePort })
  say(`
Demo running offline at ${base}   (Ctrl-C stops everything)
  CoinGecko emulator: ${coingecko.url}
  Coinbase emulator:  ${coinbase.url}   (the second source${creditsSpent ? ": CoinGecko's credits are spent, majors come from it" : "; --credits-spent shows it at work"})
                      ${coinbase.wsUrl}   (its WebSocket feed, COINBASE_WS_URL)
  Brevo emulator:     ${brevo.url}
  Data:               ${dataDir}

  Docs:    ${base}/docs
  Widget:  ${widgetPage.url}/   (a page of another origin embedding ${base}/widget.js,
           under Content-Security-Policy: ${widgetPage.contentSecurityPolicy})
  Health:  curl -s ${base}/api/health
  Rates:   curl -s ${base}/api/v1/exchange-rates -H 'content-type: application/json' -d '{"cryptos":["BTC","ETH"],"days":7}'
  Sign-up: curl -s ${base}/api/subscribe -H 'content-type: application/json' -d '{"email":"you@example.com","locale":"en"}'
  Token:   curl -s ${base}/oauth/token -u '${client.client_id}:${client.client_secret}' -d grant_type=client_credentials
  More clients (same DATA_DIR as this service):
           DATA_DIR=${dataDir} npm run -s clients -- create --name NAME --scope "rates:read"
`)
}
