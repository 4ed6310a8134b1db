/**
 * `npm run demo` (test/emulators/demo.ts): a busy port is reported before anything else and stops the
 * demo; `--smoke` passes against its own instance; the banner prints plain URLs (no macOS `open`), the widget's
 * page among them on another origin; and
 * SIGTERM to `npm run demo` stops the service and the emulators with exit 0.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { freePort } from "../../support/spawn.ts"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const env = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)))
const started: Array<ChildProcess> = []
afterAll(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})

const launch = (command: string, args: ReadonlyArray<string>) => {
  const child = spawn(command, args, { cwd: ROOT, env: env(), stdio: ["ignore", "pipe", "pipe"] })
  started.push(child)
  const out = { stdout: "", stderr: "" }
  child.stdout!.on("data", (c) => (out.stdout += c))
  child.stderr!.on("data", (c) => (out.stderr += c))
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)))
  return { child, out, exit }
}

const within = <A>(ms: number, p: Promise<A>) =>
  Promise.race([p, new Promise<"timeout">((r) => setTimeout(() => r("timeout"), ms))])

const answers = (port: number) =>
  fetch(`http://127.0.0.1:${port}/api/health`, { signal: AbortSignal.timeout(1_000) }).then(() => true, () => false)

describe("npm run demo", () => {
  it("on a taken port: says so and stops, before printing anything else (exit 1)", async () => {
    const port = await freePort()
    const other = createServer((socket) => socket.end("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"))
    await new Promise<void>((r) => other.listen(port, "127.0.0.1", () => r()))
    try {
      const demo = launch(process.execPath, ["test/emulators/demo.ts", "--port", String(port), "--smoke"])
      const code = await within(10_000, demo.exit)
      expect(code).toBe(1)
      expect(demo.out.stdout).toBe("")
      expect(demo.out.stderr).toMatch(new RegExp(`^demo: port ${port} is taken on 127\\.0\\.0\\.1.*--port ${port + 1}\\n$`))
      expect(demo.out.stderr).not.toMatch(/EADDRINUSE|Error|at /)
    } finally {
      other.close()
    }
  }, 15_000)

  it("--smoke: one request per endpoint against its own instance, exit 0", async () => {
    const port = await freePort()
    const demo = launch(process.execPath, ["test/emulators/demo.ts", "--port", String(port), "--smoke"])
    const code = await within(30_000, demo.exit)
    expect(code, demo.out.stdout + demo.out.stderr).toBe(0)
    expect(demo.out.stdout.match(/^ok {3}200 /gm)).toHaveLength(7)
    expect(await answers(port)).toBe(false)
  }, 35_000)

  it("--smoke --credits-spent: CoinGecko refuses everything, the rates answer comes from Coinbase", async () => {
    const port = await freePort()
    const demo = launch(process.execPath, ["test/emulators/demo.ts", "--port", String(port), "--smoke", "--credits-spent"])
    const code = await within(30_000, demo.exit)
    expect(code, demo.out.stdout + demo.out.stderr).toBe(0)
    expect(demo.out.stdout).toMatch(/^ok {3}200 POST \/api\/v1\/exchange-rates$/m)
    expect(demo.out.stdout).toMatch(/^ok {3}source coinbase \(prices: coinbase; series: coinbase\)$/m)
  }, 35_000)

  it("prints plain URLs (no `open`), and SIGTERM to npm stops everything with exit 0", async () => {
    const port = await freePort()
    const demo = launch("npm", ["run", "demo", "--", "--port", String(port)])
    const start = Date.now()
    while (!demo.out.stdout.includes("More clients")) {
      if (demo.child.exitCode !== null || Date.now() - start > 30_000) throw new Error(`demo did not start:\n${demo.out.stdout}${demo.out.stderr}`)
      await new Promise((r) => setTimeout(r, 100))
    }
    await new Promise((r) => setTimeout(r, 100)) // the rest of the banner
    expect(demo.out.stdout).toContain(`Demo running offline at http://127.0.0.1:${port}`)
    expect(demo.out.stdout).toMatch(new RegExp(`^  Docs: +http://127\\.0\\.0\\.1:${port}/docs$`, "m"))
    // The widget's page: another origin (port), embedding the service's script under a CSP naming only the service.
    const widgetPage = /^ {2}Widget: +(http:\/\/127\.0\.0\.1:(\d+)\/) /m.exec(demo.out.stdout)
    expect(widgetPage?.[2]).not.toBe(String(port))
    const pageResponse = await fetch(widgetPage![1]!)
    expect(pageResponse.headers.get("content-security-policy")).toContain(`script-src http://127.0.0.1:${port};`)
    expect(await pageResponse.text()).toContain(`<script type="module" src="http://127.0.0.1:${port}/widget.js">`)
    expect(demo.out.stdout).not.toMatch(/\bopen http/)
    expect(demo.out.stdout).toMatch(/DATA_DIR=\S+ npm run -s clients -- create/)
    expect(await answers(port)).toBe(true)
    demo.child.kill("SIGTERM")
    expect(await within(10_000, demo.exit)).toBe(0)
    expect(await answers(port)).toBe(false)
  }, 45_000)
})
