/** The CoinGecko emulator the service talks to during the bench: no request leaves the machine. */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { fail, NODE, ROOT, sleep } from "./common.ts"
import { call, freePort, pinned, stopChild, tail, track } from "./processes.ts"

export interface Upstream {
  readonly url: string
  readonly totalCalls: () => Promise<number>
  /** Delays answers on paths under `pathPrefix` (0 removes it); the in-process emulator only. */
  readonly setLatency?: (pathPrefix: string, ms: number) => void
  readonly close: () => Promise<void>
}

/** In this process (test/emulators/coingecko.ts); a child process if its API is missing. */
export const startUpstream = async (loadCpus: string | undefined): Promise<Upstream> => {
  const mod = (await import("../emulators/coingecko.ts")) as Record<string, unknown>
  const start = mod.startCoinGeckoEmulator
  if (typeof start === "function") {
    const emulator = (await (start as (o: { port: number; host: string }) => Promise<unknown>)({ port: 0, host: "127.0.0.1" })) as {
      url: string
      stats: () => { total: number }
      setLatency: (pathPrefix: string, ms: number) => void
      close: () => Promise<void>
    }
    return { url: emulator.url, totalCalls: async () => emulator.stats().total, setLatency: emulator.setLatency, close: () => emulator.close() }
  }
  // Fallback: the standalone emulator, which prints one JSON line with its base URL.
  const port = await freePort()
  const argv = pinned(loadCpus, [NODE, join(ROOT, "test/emulators/coingecko.ts"), "--port", String(port)])
  const child = track(spawn(argv[0]!, argv.slice(1), { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] }))
  const out = tail(child.stdout)
  const err = tail(child.stderr)
  const until = Date.now() + 15_000
  while (!out().includes("\n")) {
    if (Date.now() > until || child.exitCode !== null) fail(`CoinGecko emulator did not start:\n${err()}`)
    await sleep(50)
  }
  const first = out().split("\n")[0]!.trim()
  const url = first.startsWith("{") ? (JSON.parse(first) as { url: string }).url : first
  return {
    url,
    totalCalls: async () => JSON.parse((await call(port, "GET", "/__stats")).body.toString("utf8")).total as number,
    close: async () => void (await stopChild(child))
  }
}
