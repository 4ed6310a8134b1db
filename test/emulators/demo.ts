/**
 * `npm run demo`: the whole service offline. Starts the CoinGecko- and Brevo-compatible emulators,
 * registers a demo OAuth client, starts the service against them and prints what to try.
 *   --port N    service port (default 3000)
 *   --smoke     run one request per endpoint, print the statuses and exit (0 when all are as expected)
 * Everything listens on 127.0.0.1 only; data goes to a fresh temporary DATA_DIR.
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startBrevoEmulator } from "./brevo.ts"
import { startCoinGeckoEmulator } from "./coingecko.ts"

const args = process.argv.slice(2)
const port = Number(args[args.indexOf("--port") + 1]) || 3000
const smoke = args.includes("--smoke")
const base = `http://127.0.0.1:${port}`

const coingecko = await startCoinGeckoEmulator({ host: "127.0.0.1" })
const brevo = await startBrevoEmulator({ host: "127.0.0.1" })
const dataDir = mkdtempSync(join(tmpdir(), "crypto-api-demo-"))
const env = {
  ...process.env,
  PORT: String(port),
  HOST: "127.0.0.1",
  PUBLIC_BASE_URL: base,
  DATA_DIR: dataDir,
  COINGECKO_BASE_URL: coingecko.url,
  NEWSLETTER_PROVIDER: "brevo",
  BREVO_BASE_URL: brevo.url,
  BREVO_API_KEY: "test-brevo-key",
  BREVO_LIST_IDS: "7",
  BREVO_DOI_TEMPLATES: "es:11,en:12,fr:13,it:14,pt:15",
  BREVO_DOI_REDIRECT_URL: `${base}/docs`
}

const created = spawnSync(process.execPath, ["src/cli/clients.ts", "create", "--name", "demo", "--scope", "health:read rates:read subscriptions:write"], { env, encoding: "utf8" })
if (created.status !== 0) {
  console.error(created.stderr)
  process.exit(1)
}
const client = JSON.parse(created.stdout) as { client_id: string; client_secret: string }

const service = spawn(process.execPath, ["src/main.ts"], { env, stdio: ["ignore", smoke ? "ignore" : "inherit", "inherit"] })
service.on("exit", (code) => {
  if (smoke && code !== 0) console.error(`the service exited with ${code}`)
})
// Synchronous, so that nothing printed is lost when the process exits right after.
const say = (line: string) => writeSync(1, `${line}\n`)
const shutdown = async (code: number) => {
  service.kill("SIGTERM")
  await Promise.all([coingecko.close(), brevo.close()])
  process.exit(code)
}
process.on("SIGINT", () => void shutdown(0))
process.on("SIGTERM", () => void shutdown(0))
service.on("exit", (code) => {
  if (!smoke) void shutdown(code ?? 1)
})

for (let i = 0; ; i++) {
  if (await fetch(`${base}/api/health`).then(() => true, () => false)) break
  if (i > 200) {
    console.error("the service did not start")
    await shutdown(1)
  }
  await new Promise((r) => setTimeout(r, 50))
}

const basic = Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString("base64")
if (smoke) {
  const json = { "content-type": "application/json" }
  const checks: Array<[string, Promise<Response>, number]> = [
    ["GET /api/health", fetch(`${base}/api/health`), 200],
    ["POST /api/v1/exchange-rates", fetch(`${base}/api/v1/exchange-rates`, { method: "POST", headers: json, body: JSON.stringify({ cryptos: ["BTC", "ETH", "FOO"], days: 7 }) }), 200],
    ["POST /api/subscribe", fetch(`${base}/api/subscribe`, { method: "POST", headers: json, body: JSON.stringify({ email: "demo@example.com", locale: "es" }) }), 200],
    ["POST /oauth/token", fetch(`${base}/oauth/token`, { method: "POST", headers: { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded" }, body: "grant_type=client_credentials" }), 200],
    ["GET /.well-known/oauth-authorization-server", fetch(`${base}/.well-known/oauth-authorization-server`), 200],
    ["GET /docs", fetch(`${base}/docs`), 200]
  ]
  let ok = true
  for (const [name, response, expected] of checks) {
    const status = (await response).status
    ok &&= status === expected
    say(`${status === expected ? "ok  " : "FAIL"} ${status} ${name}`)
  }
  say(`brevo emulator received ${brevo.received().length} request(s)`)
  await shutdown(ok ? 0 : 1)
} else {
  say(`
Demo running offline at ${base}   (Ctrl-C stops everything)
  CoinGecko emulator: ${coingecko.url}
  Brevo emulator:     ${brevo.url}
  Data:               ${dataDir}

  Docs:   open ${base}/docs
  Health: curl -s ${base}/api/health
  Rates:  curl -s ${base}/api/v1/exchange-rates -H 'content-type: application/json' -d '{"cryptos":["BTC","ETH"],"days":7}'
  Sign-up: curl -s ${base}/api/subscribe -H 'content-type: application/json' -d '{"email":"you@example.com","locale":"en"}'
  Token:  curl -s ${base}/oauth/token -u '${client.client_id}:${client.client_secret}' -d grant_type=client_credentials
`)
}
