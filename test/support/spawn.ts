/**
 * Runs the real entrypoint (`node src/main.ts`) as a child process, for tests of what only a whole
 * process shows: shared state between instances, SIGTERM, the metrics listener, start-up checks.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface ServiceProcess {
  readonly url: string
  readonly port: number
  readonly child: ChildProcess
  readonly output: () => string
  /** Sends the signal and resolves with the exit code. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
}

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

export const tempDataDir = () => mkdtempSync(join(tmpdir(), "crypto-api-"))

/**
 * What the environment of every process a test starts holds besides its own variables: the PATH, and Node's
 * compile cache (vitest.config.ts sets it), with which a process loads this repository's modules in half the time.
 */
export const childEnv: Record<string, string> = {
  PATH: process.env.PATH ?? "",
  ...(process.env.NODE_COMPILE_CACHE === undefined ? {} : { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE })
}

/**
 * For a test that needs an unprivileged process (root writes anywhere, and would install packages):
 * as root, `nobody`'s ids; otherwise the process is unprivileged already and `{}` is returned.
 */
export const unprivileged = (): { readonly uid?: number; readonly gid?: number } =>
  process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {}

/**
 * Whether `unprivileged()` can run this checkout's Node on its sources: not when the checkout lies
 * under a directory only root may enter (`/root`, a `mktemp -d`). Such a test is then skipped, named.
 */
export const unprivilegedCanRunNode = (): boolean =>
  spawnSync(process.execPath, ["-e", "require('node:fs').accessSync('src/main.ts', require('node:fs').constants.R_OK)"], {
    ...unprivileged(),
    stdio: "ignore",
    timeout: 10_000
  }).status === 0

/**
 * Upstreams a spawned service may call at start (the coin index, the second source's product list):
 * a closed local port, never the providers' real hosts. Tests that want answers pass an emulator's URL.
 */
export const OFFLINE_UPSTREAMS = {
  COINGECKO_BASE_URL: "http://127.0.0.1:9/unused",
  COINBASE_BASE_URL: "http://127.0.0.1:9/unused",
  COINBASE_WS_URL: "none"
} as const

/**
 * Starts the service and waits until it listens; rejects with its output if it exits first. Its free port taken
 * before it bound it, it is started again on another, unless the test chose the port (PORT in `env`).
 */
export const spawnService = (env: Record<string, string>, timeoutMs = 20_000): Promise<ServiceProcess> =>
  env.PORT !== undefined ? spawnServiceOnce(env, timeoutMs) : onAnotherPortIfTaken(() => spawnServiceOnce(env, timeoutMs), /PORT: \d+ is already in use/)

/**
 * `start` (which picks a free port) again, up to five times, while it fails as `taken` says: another process took the
 * free port before the server bound it (two processes asking for a free port at once may be handed the same one).
 */
export const onAnotherPortIfTaken = async <A>(start: () => Promise<A>, taken: RegExp): Promise<A> => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start()
    } catch (error) {
      if (attempt >= 5 || !taken.test(String(error))) throw error
    }
  }
}

const spawnServiceOnce = async (env: Record<string, string>, timeoutMs: number): Promise<ServiceProcess> => {
  const port = await freePort()
  const child = spawn(process.execPath, ["src/main.ts"], {
    env: {
      ...childEnv,
      HOST: "127.0.0.1",
      PORT: String(port),
      DATA_DIR: tempDataDir(),
      ...OFFLINE_UPSTREAMS,
      ...env
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (chunk) => (output += chunk))
  child.stderr!.on("data", (chunk) => (output += chunk))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start in ${timeoutMs} ms:\n${output}`)), timeoutMs)
    const poll = setInterval(() => {
      if (output.includes("Listening on")) {
        clearTimeout(timer)
        clearInterval(poll)
        resolve()
      }
    }, 25)
    void exited.then((code) => {
      clearTimeout(timer)
      clearInterval(poll)
      reject(new Error(`service exited with ${code} before listening:\n${output}`))
    })
  })
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    child,
    output: () => output,
    stop: (signal = "SIGTERM") => {
      if (child.exitCode !== null) return Promise.resolve(child.exitCode)
      child.kill(signal)
      return exited
    }
  }
}

/** Resolves with the exit code and output of a start that is expected to fail. */
export const startExpectingFailure = (env: Record<string, string>, timeoutMs = 20_000) =>
  new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["src/main.ts"], {
      env: { PATH: process.env.PATH ?? "", HOST: "127.0.0.1", PORT: "0", DATA_DIR: tempDataDir(), ...OFFLINE_UPSTREAMS, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (c) => (output += c))
    child.stderr.on("data", (c) => (output += c))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`start did not fail in ${timeoutMs} ms:\n${output}`))
    }, timeoutMs)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
