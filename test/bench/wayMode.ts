/**
 * `npm run bench -- --way [--root DIR]`: the way one cold exchange-rates request takes through the code,
 * measured on a real process (`node src/main.ts` of the checkout at DIR, default this one) against the
 * CoinGecko emulator, through the V8 inspector:
 *   1. files entered: the files of `src` with a function run for one cold request (precise coverage
 *      taken just before and just after it: `{"cryptos":["BTC","ETH"],"days":7}`);
 *   2. cross-file hops: the same request for two other coins, cold too, with a breakpoint at the first
 *      statement of each of those functions run at most `--calls` times (10: a function called per point
 *      of a series, or per character, would stop the request thousands of times); the files of the
 *      functions entered, in order, consecutive repeats collapsed, and each change of file counted as a hop; the hops before the first function
 *      of a file named `--prices` (default: one whose path has "latest" or "marketData") are the way to
 *      the latest prices.
 *   3. back and forth: how often the way goes from a file to another and straight back, per pair.
 * `--only PREFIX` counts only the files under it (`src/rates`: the capability's own way); `--sequence`
 * prints the files in the order entered. The second source is off (RATES_FALLBACK=none), credits aplenty:
 * the way CoinGecko serves the request.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { startCoinGeckoEmulator } from "../emulators/coingecko.ts"
import { fail, HOST, NODE, ROOT, sleep } from "./common.ts"
import { childEnv } from "../support/spawn.ts"

interface Cdp {
  readonly send: (method: string, params?: object) => Promise<any>
  readonly on: (method: string, listener: (params: any) => void) => void
  readonly close: () => void
}

const connect = (url: string) =>
  new Promise<Cdp>((resolveCdp, reject) => {
    const socket = new WebSocket(url)
    let id = 0
    const pending = new Map<number, (message: any) => void>()
    const listeners = new Map<string, Array<(params: any) => void>>()
    socket.onmessage = (event) => {
      const message = JSON.parse(String(event.data))
      if (message.id !== undefined) pending.get(message.id)?.(message)
      else for (const listener of listeners.get(message.method) ?? []) listener(message.params)
    }
    socket.onerror = () => reject(new Error(`cannot reach the inspector at ${url}`))
    socket.onopen = () =>
      resolveCdp({
        send: (method, params = {}) =>
          new Promise((done, failed) => {
            const n = ++id
            pending.set(n, (message) => (message.error === undefined ? done(message.result) : failed(new Error(`${method}: ${message.error.message}`))))
            socket.send(JSON.stringify({ id: n, method, params }))
          }),
        on: (method, listener) => listeners.set(method, [...(listeners.get(method) ?? []), listener]),
        close: () => socket.close()
      })
  })

/** The service of `root` with an inspector, and the inspector's URL. */
const startService = async (root: string, env: Record<string, string>) => {
  const child: ChildProcess = spawn(NODE, ["--inspect=127.0.0.1:0", join(root, "src/main.ts")], {
    cwd: root,
    env: { ...childEnv, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const inspector = await new Promise<string>((found, failed) => {
    let text = ""
    child.stderr!.on("data", (chunk) => {
      text += String(chunk)
      const match = /ws:\/\/\S+/.exec(text)
      if (match !== null) found(match[0])
    })
    child.once("exit", (code) => failed(new Error(`the service exited (${code}): ${text}`)))
  })
  child.stdout!.resume()
  return { child, inspector }
}

const ask = (port: number, cryptos: ReadonlyArray<string>) =>
  fetch(`http://${HOST}:${port}/api/v1/exchange-rates`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ cryptos, days: 7 })
  }).then(async (res) => ({ status: res.status, body: await res.text() }))

interface Fn {
  readonly count: number
  readonly file: string
  readonly scriptId: string
  readonly name: string
  readonly start: number
  readonly end: number
}

export const runWayMode = async (argv: ReadonlyArray<string>) => {
  const option = (name: string) => {
    const i = argv.indexOf(`--${name}`)
    return i === -1 ? undefined : argv[i + 1]
  }
  const root = resolve(option("root") ?? ROOT)
  const pricesFile = new RegExp(option("prices") ?? "latest|marketData")
  const maxCalls = Number(option("calls") ?? 10)
  // Only the files under this prefix count (`--only src/rates`: the capability's own way).
  const only = option("only") ?? "src/"
  const emulator = await startCoinGeckoEmulator({ host: HOST, now: Date.UTC(2026, 10, 22, 10) })
  const dataDir = mkdtempSync(join(tmpdir(), "bench-way-"))
  const port = 20_000 + Math.floor(Math.random() * 20_000)
  const { child, inspector } = await startService(root, {
    HOST,
    PORT: String(port),
    DATA_DIR: dataDir,
    COINGECKO_BASE_URL: emulator.url,
    COINGECKO_CALLS_PER_MONTH: "1000000000",
    // Paused at every breakpoint, a request takes seconds: no timeout may cut it.
    COINGECKO_TIMEOUT_MS: "60000",
    COINGECKO_REQUEST_BUDGET_MS: "60000",
    RATES_FALLBACK: "none",
    COINBASE_WS_URL: "none"
  })
  const cdp = await connect(inspector)
  try {
    const scripts = new Map<string, string>()
    cdp.on("Debugger.scriptParsed", (script) => {
      if (script.url.startsWith("file://")) scripts.set(script.scriptId, script.url)
    })
    await cdp.send("Runtime.runIfWaitingForDebugger")
    await cdp.send("Debugger.enable")
    await cdp.send("Profiler.enable")
    // Up, with its lists loaded (an uncurated symbol needs the coin index).
    for (let i = 0; ; i++) {
      const answer = await ask(port, ["LINK"]).catch(() => undefined)
      if (answer?.status === 200) break
      if (i > 100) fail(`the service at ${root} does not answer: ${answer?.status} ${answer?.body}`)
      await sleep(100)
    }
    await sleep(500)
    const src = `file://${join(root, "src")}/`
    const fileOf = (scriptId: string) => scripts.get(scriptId)?.startsWith(src) === true ? relative(root, fileURLToPath(scripts.get(scriptId)!)) : undefined

    // 1. Files entered: the functions of src run for one cold request.
    await cdp.send("Profiler.startPreciseCoverage", { callCount: true, detailed: false })
    await cdp.send("Profiler.takePreciseCoverage")
    const first = await ask(port, ["BTC", "ETH"])
    if (first.status !== 200) fail(`the cold request answered ${first.status}: ${first.body}`)
    await sleep(300)
    const { result } = await cdp.send("Profiler.takePreciseCoverage")
    await cdp.send("Profiler.stopPreciseCoverage")
    const ran: Array<Fn> = []
    for (const script of result) {
      const file = fileOf(script.scriptId)
      if (file === undefined) continue
      for (const fn of script.functions) {
        const range = fn.ranges[0]
        if (range.count > 0 && range.startOffset > 0) {
          ran.push({ file, scriptId: script.scriptId, name: fn.functionName || "(anonymous)", start: range.startOffset, end: range.endOffset, count: range.count })
        }
      }
    }
    const files = [...new Set(ran.map((fn) => fn.file))].filter((file) => file.startsWith(only)).sort()

    // 2. Hops: a breakpoint at the first statement of each of those functions, for two other cold coins.
    const byBreakpoint = new Map<string, Fn>()
    const sources = new Map<string, string>()
    const position = async (scriptId: string, offset: number) => {
      if (!sources.has(scriptId)) sources.set(scriptId, (await cdp.send("Debugger.getScriptSource", { scriptId })).scriptSource)
      const before = sources.get(scriptId)!.slice(0, offset).split("\n")
      return { scriptId, lineNumber: before.length - 1, columnNumber: before.at(-1)!.length }
    }
    for (const fn of ran.filter((fn) => fn.count <= maxCalls)) {
      const { locations } = await cdp.send("Debugger.getPossibleBreakpoints", {
        start: await position(fn.scriptId, fn.start),
        end: await position(fn.scriptId, fn.end),
        restrictToFunction: true
      })
      if (locations.length === 0) continue
      const set = await cdp.send("Debugger.setBreakpoint", { location: locations[0] }).catch(() => undefined)
      if (set !== undefined) byBreakpoint.set(set.breakpointId, fn)
    }
    const entered: Array<Fn> = []
    cdp.on("Debugger.paused", (paused) => {
      for (const id of paused.hitBreakpoints ?? []) {
        const fn = byBreakpoint.get(id)
        if (fn !== undefined) entered.push(fn)
      }
      void cdp.send("Debugger.resume")
    })
    const second = await ask(port, ["SOL", "ADA"])
    await sleep(300)
    await cdp.send("Debugger.disable")
    if (second.status !== 200) fail(`the second cold request answered ${second.status}`)
    const way: Array<string> = []
    for (const fn of entered) if (fn.file.startsWith(only) && way.at(-1) !== fn.file) way.push(fn.file)
    const toPrices = way.findIndex((file) => pricesFile.test(file))

    process.stdout.write(`the way of one cold POST /api/v1/exchange-rates {"cryptos":["BTC","ETH"],"days":7} through ${root}\n`)
    process.stdout.write(`files entered: ${files.length}\n${files.map((f) => `  ${f} (${ran.filter((fn) => fn.file === f).length} functions)`).join("\n")}\n`)
    process.stdout.write(
      `functions run: ${ran.length}; of those run at most ${maxCalls} times, entered in order: ${entered.length}; ` +
        `cross-file hops: ${way.length - 1}; hops before the latest prices (${pricesFile}): ${toPrices}\n`
    )
    // Back and forth: a hop from A to B followed at once by the hop back to A (a callback, or a caller
    // entered again between two calls), counted per pair of files.
    const bounces = new Map<string, number>()
    for (let i = 2; i < way.length; i++) {
      if (way[i] !== way[i - 2]) continue
      const pair = [way[i]!, way[i - 1]!].sort().join(" <-> ")
      bounces.set(pair, (bounces.get(pair) ?? 0) + 1)
    }
    const bounced = [...bounces].sort((a, b) => b[1] - a[1])
    process.stdout.write(
      `back and forth (A -> B -> A): ${bounced.reduce((sum, [, n]) => sum + n, 0)}, most: ` +
        `${bounced.slice(0, 5).map(([pair, n]) => `${n} ${pair}`).join("; ")}\n`
    )
    if (argv.includes("--sequence")) process.stdout.write(`${way.join("\n")}\n`)
  } finally {
    cdp.close()
    child.kill("SIGTERM")
    await emulator.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
