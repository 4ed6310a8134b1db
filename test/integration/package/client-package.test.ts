/**
 * The typed client as an integrator receives it: the tarball of `npm run pack:client` installed into a
 * fresh TypeScript project (NodeNext, strict, no skipLibCheck), type-checked with this repository's tsc,
 * run on the system Node (20) against a real server, and loaded by Chromium as native ES modules.
 * Nothing but the npm cache is used (`npm install --offline`; `effect` comes from this repository).
 */
import { execFile, spawnSync, type SpawnSyncOptions } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as jose from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, testOAuth } from "../../support/app.ts"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const WORK = mkdtempSync(join(tmpdir(), "client-package-"))
const CONSUMER = join(WORK, "consumer")
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

/** npm of the machine, without the `npm_*` variables of an outer `npm test` (they would redirect it). */
const cleanEnv = () => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))),
  npm_config_update_notifier: "false",
  npm_config_fund: "false",
  npm_config_audit: "false"
})

const run = (command: string, args: ReadonlyArray<string>, options: SpawnSyncOptions = {}) => {
  const res = spawnSync(command, args, { encoding: "utf8", timeout: 60_000, env: cleanEnv(), ...options })
  if (res.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited with ${res.status}:\n${res.stdout}${res.stderr}${res.error ?? ""}`)
  }
  return String(res.stdout)
}

/** Asynchronous: the server under test runs in this process and must keep answering. */
const runAsync = (command: string, args: ReadonlyArray<string>, cwd: string) =>
  new Promise<string>((resolve, reject) => {
    execFile(command, args, { cwd, env: cleanEnv(), timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${command} ${args.join(" ")} failed: ${error.message}\n${stdout}${stderr}`))
      else resolve(stdout)
    })
  })

/** The machine's own Node (not the project's pinned Node 24): /usr/bin/node or the first one on PATH. */
const systemNode = (): string => {
  const onPath = (process.env.PATH ?? "").split(delimiter)
    .filter((dir) => dir !== "" && !dir.includes("node_modules"))
    .map((dir) => join(dir, "node"))
  const found = ["/usr/bin/node", ...onPath].find((path) => existsSync(path))
  if (found === undefined) throw new Error("no system Node found (/usr/bin/node or on PATH)")
  return found
}

/** What an integrator writes: anonymous health, a token with Basic credentials, typed failures. */
const CONSUMER_PROGRAM = `
import { Effect } from "effect"
import { FetchHttpClient } from "effect/http"
import { makeApiClient, type NoValidSymbols, OAuthError } from "crypto-landing-api/client"

declare const process: { readonly argv: ReadonlyArray<string>; readonly version: string; exitCode?: number }

const baseUrl = process.argv[2]!
const program = Effect.gen(function*() {
  const anonymous = yield* makeApiClient({ baseUrl })
  const health = yield* anonymous.getHealth()
  const api = yield* makeApiClient({ baseUrl, clientCredentials: { clientId: "svc-all", clientSecret: "secret-all" } })
  const token = yield* api.requestToken({ payload: { grant_type: "client_credentials", scope: "rates:read" } })
  const authed = yield* makeApiClient({ baseUrl, accessToken: token.access_token })
  const rates = yield* authed.getHistoricalExchangeRates({ payload: { cryptos: ["BTC"], days: 3 } })
  // A private_key_jwt client: its private JWK signs a client assertion (Web Crypto), no secret anywhere.
  const privateKey = JSON.parse(process.argv[3]!) as JsonWebKey
  // aud: the service's issuer (the test server's PUBLIC_BASE_URL; by default the baseUrl).
  const audience = "https://api.example.test"
  const keyed = yield* makeApiClient({ baseUrl, clientCredentials: { clientId: "svc-keyed", privateKey, kid: "package-key", audience } })
  const keyedToken = yield* keyed.requestToken({ payload: { grant_type: "client_credentials", scope: "rates:read" } })
  const wrong = yield* makeApiClient({ baseUrl, clientCredentials: { clientId: "svc-all", clientSecret: "wrong" } })
  const refused = yield* wrong.requestToken({ payload: { grant_type: "client_credentials" } }).pipe(
    Effect.map(() => "issued"),
    Effect.catchTag("OAuthError", (e: OAuthError) =>
      Effect.succeed({ tag: e._tag, error: e.error, status: e.status, isClass: e instanceof OAuthError }))
  )
  const problem = yield* anonymous.getHistoricalExchangeRates({ payload: { cryptos: ["NOPE"] } }).pipe(
    Effect.map(() => "ok"),
    Effect.catchTag("NoValidSymbols", (e: NoValidSymbols) => Effect.succeed({ tag: e._tag, unknown: e.unknown }))
  )
  // Typed: each rate's sources and when its price was observed, and the answer's source, as the OpenAPI
  // schema says (compiled by tsc below).
  const sources: ReadonlyArray<"coingecko" | "coinbase" | "mixed"> = rates.rates.map((rate) => rate.source)
  const priced: ReadonlyArray<"coingecko" | "coinbase"> = rates.rates.map((rate) => rate.sources.price)
  const observed: ReadonlyArray<string> = rates.rates.map((rate) => rate.asOf)
  const answerSource: "coingecko" | "coinbase" | "mixed" = rates.source
  return { node: process.version, health: health.status, scope: token.scope, keyedScope: keyedToken.scope, points: rates.rates[0]?.series.length, sources, priced, observed, answerSource, refused, problem }
})
Effect.runPromise(program.pipe(Effect.provide(FetchHttpClient.layer))).then(
  (result) => console.log(JSON.stringify(result)),
  (error) => { console.error(String(error)); process.exitCode = 1 }
)
`

/** The same client in a page: plain JavaScript, modules resolved by an import map (no bundler). */
const BROWSER_PROGRAM = `
import { Effect } from "effect"
import { FetchHttpClient } from "effect/http"
import { makeApiClient } from "crypto-landing-api/client"
const program = Effect.gen(function*() {
  const api = yield* makeApiClient({ baseUrl: globalThis.API_BASE_URL })
  const health = yield* api.getHealth()
  const problem = yield* api.getHistoricalExchangeRates({ payload: { cryptos: ["NOPE"] } }).pipe(
    Effect.map(() => "ok"), Effect.catchTag("NoValidSymbols", (e) => Effect.succeed(e._tag)))
  return { health: health.status, problem }
})
globalThis.RESULT = Effect.runPromise(program.pipe(Effect.provide(FetchHttpClient.layer)))
  .then((r) => JSON.stringify(r), (e) => "failed: " + String(e))
`

let app: TestApp
let tarball = ""
const timings: Record<string, number> = {}
const timed = <A>(name: string, f: () => A): A => {
  const start = performance.now()
  try {
    return f()
  } finally {
    timings[name] = Math.round(performance.now() - start)
  }
}

let privateJwk = ""
beforeAll(async () => {
  const { privateKey, publicKey } = await jose.generateKeyPair("ES256", { extractable: true })
  privateJwk = JSON.stringify(await jose.exportJWK(privateKey))
  const publicJwk = { ...(await jose.exportJWK(publicKey)), kid: "package-key" }
  app = await startTestApp({ oauth: testOAuth({ clients: [{ name: "Keyed", clientId: "svc-keyed", scopes: ["rates:read"], keys: { jwks: { keys: [publicJwk] } } }] }) })
  // Built outside the checkout: a test leaves no dist/ behind.
  const dist = join(WORK, "dist")
  timed("build", () => run(process.execPath, ["src/client/build.ts", "--out", dist], { cwd: ROOT }))
  const packed = timed("pack", () => run("npm", ["pack", dist, "--pack-destination", WORK, "--json"], { cwd: ROOT }))
  tarball = join(WORK, (JSON.parse(packed) as Array<{ filename: string }>)[0]!.filename)
}, 60_000)
afterAll(async () => {
  await app?.close()
  console.log(`client package timings (ms): ${JSON.stringify(timings)}`)
})

describe("the typed client package (npm run pack:client)", () => {
  it("holds compiled JavaScript and declarations only, with effect as its only dependency", () => {
    const listing = run("tar", ["-tzf", tarball]).trim().split("\n").map((f) => f.replace(/^package\//, "")).sort()
    expect(listing).toContain("client.js")
    expect(listing).toContain("client.d.ts")
    expect(listing).toContain("api/Api.js")
    expect(listing.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([])
    const manifest = JSON.parse(run("tar", ["-xzOf", tarball, "package/package.json"]))
    expect(manifest.dependencies).toBeUndefined()
    expect(Object.keys(manifest.peerDependencies)).toEqual(["effect"])
    expect(manifest.exports["./client"]).toEqual({ types: "./client.d.ts", import: "./client.js", default: "./client.js" })
    expect(manifest.engines.node).toBe(">=20")
  })

  it("installs into a project without the server's packages (no node binary, no platform-node)", () => {
    mkdirSync(join(CONSUMER, "src"), { recursive: true })
    writeFileSync(join(CONSUMER, "package.json"), JSON.stringify({
      name: "integrator",
      private: true,
      type: "module",
      dependencies: { effect: `file:${join(ROOT, "node_modules/effect")}`, "crypto-landing-api": `file:${tarball}` }
    }))
    timed("install", () => run("npm", ["install", "--offline", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: CONSUMER }))
    const installed = readdirSync(join(CONSUMER, "node_modules")).filter((name) => !name.startsWith(".")).sort()
    expect(installed).toEqual(["crypto-landing-api", "effect"])
    expect(existsSync(join(CONSUMER, "node_modules/node"))).toBe(false)
    expect(existsSync(join(CONSUMER, "node_modules/@effect/platform-node"))).toBe(false)
  }, 60_000)

  it("type-checks in a strict NodeNext project with this repository's tsc", () => {
    writeFileSync(join(CONSUMER, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        lib: ["ES2022", "DOM"],
        types: [],
        strict: true,
        skipLibCheck: false,
        rootDir: "src",
        outDir: "out"
      },
      include: ["src"]
    }))
    writeFileSync(join(CONSUMER, "src/main.ts"), CONSUMER_PROGRAM)
    timed("tsc", () => run(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "."], { cwd: CONSUMER }))
    expect(existsSync(join(CONSUMER, "out/main.js"))).toBe(true)
  }, 60_000)

  it("runs on the system Node: health, a token with Basic credentials and with a private key, OAuthError and a problem by _tag", async () => {
    const start = performance.now()
    const out = await runAsync(systemNode(), ["out/main.js", app.url, privateJwk], CONSUMER)
    timings.run = Math.round(performance.now() - start)
    const result = JSON.parse(out)
    expect(Number(/^v(\d+)/.exec(result.node)![1])).toBeGreaterThanOrEqual(20)
    expect(result).toMatchObject({
      health: "healthy",
      scope: "rates:read",
      keyedScope: "rates:read",
      points: 3,
      sources: ["coingecko"],
      priced: ["coingecko"],
      observed: [expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)],
      answerSource: "coingecko",
      refused: { tag: "OAuthError", error: "invalid_client", status: 401, isClass: true },
      problem: { tag: "NoValidSymbols", unknown: ["NOPE"] }
    })
  }, 30_000)

  it.skipIf(!existsSync(CHROMIUM))("runs in a browser (Chromium, native ES modules, cross-origin): health and a problem by _tag", async () => {
    const start = performance.now()
    const { chromium } = await import("playwright-core")
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      // The page's origin is not loopback while the service is: lift Chromium's private-network block.
      args: ["--no-sandbox", "--disable-gpu", "--disable-features=BlockInsecurePrivateNetworkRequests,LocalNetworkAccessChecks"]
    })
    try {
      const modules = join(CONSUMER, "node_modules")
      const effectExports = JSON.parse(readFileSync(join(modules, "effect/package.json"), "utf8")).exports as Record<string, unknown>
      const imports: Record<string, string> = {
        "effect/": "/node_modules/effect/dist/",
        "crypto-landing-api/client": "/node_modules/crypto-landing-api/client.js"
      }
      for (const [key, target] of Object.entries(effectExports)) {
        if (typeof target === "string" && !key.includes("*")) imports[`effect${key.slice(1)}`] = `/node_modules/effect/${target.slice(2)}`
      }
      const page = await browser.newPage()
      await page.route("http://integrator.test/**", (route) => {
        const path = new URL(route.request().url()).pathname
        if (path === "/") {
          return route.fulfill({
            contentType: "text/html",
            body: `<!doctype html><script type="importmap">${JSON.stringify({ imports })}</script>` +
              `<script>globalThis.API_BASE_URL = ${JSON.stringify(app.url)}</script>` +
              `<script type="module" src="/main.js"></script>`
          })
        }
        // "effect/Cause" maps to .../dist/Cause: add the extension as a bundler would from effect's exports.
        const file = path === "/main.js" ? null : join(CONSUMER, path.endsWith(".js") ? path : `${path}.js`)
        if (file !== null && !existsSync(file)) return route.fulfill({ status: 404, body: "" })
        return route.fulfill({ contentType: "text/javascript", body: file === null ? BROWSER_PROGRAM : readFileSync(file) })
      })
      await page.goto("http://integrator.test/")
      await page.waitForFunction(() => (globalThis as { RESULT?: unknown }).RESULT !== undefined, undefined, { timeout: 20_000 })
      const result = await page.evaluate(() => (globalThis as unknown as { RESULT: Promise<string> }).RESULT)
      expect(result).not.toMatch(/^failed/)
      expect(JSON.parse(result)).toEqual({ health: "healthy", problem: "NoValidSymbols" })
    } finally {
      await browser.close()
      timings.browser = Math.round(performance.now() - start)
    }
  }, 40_000)
})
