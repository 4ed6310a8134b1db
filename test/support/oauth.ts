/** Shared fixtures for the OAuth core tests. */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { upstreamHttp } from "./upstream.ts"
import { Clock, Duration, Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, onTestFinished, vi } from "vitest"
import { AppConfig } from "../../src/config/AppConfig.ts"
import { configFrom, type Env } from "./config.ts"
import type { CreateClientInput, CreateKeyClientInput } from "../../src/oauth/ClientRegistry.ts"
import type { RemoteJwks } from "../../src/oauth/jwksUri/RemoteJwks.ts"
import { OAuth } from "../../src/oauth/OAuth.ts"

export const BASE = "https://api.example.test"
export const AUDIENCE = `${BASE}/api`

/** Characters RFC 6749 §2.3.1 clients must form-encode; ids and secrets that exercise the decoding. */
export const SPECIAL_ID = "svc-client_1.a~b:+%& é名"
export const SPECIAL_SECRET = "S3cr3t-_+/=:%&é ü 🔑 ~."

const testEnv = (env: Env): Env => ({ PUBLIC_BASE_URL: BASE, TOKEN_TTL_SECONDS: "900", ...env })

const appConfigLayer = (env: Env = {}) => AppConfig.layer.pipe(Layer.provide(configFrom(testEnv(env))))

const created: Array<string> = []
// Registered in the root suite of each test file that imports these helpers.
afterAll(() => {
  for (const dir of created.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})
/** A fresh DATA_DIR, removed after the test file. */
export const tmpDataDir = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "oauth-test-"))
  created.push(dir)
  return dir
}

/** A clock the test moves by hand (token expiry, rate-limit windows). */
export const makeFakeClock = (startMs = Date.UTC(2026, 10, 22, 10, 0, 0)) => {
  let now = startMs
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => now,
    currentTimeMillis: Effect.sync(() => now),
    currentTimeNanosUnsafe: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => BigInt(now) * 1_000_000n,
    monotonicTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    sleep: (d) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, Duration.toMillis(d))))
  }
  return {
    clock,
    layer: Layer.succeed(Clock.Clock, clock),
    advance: (ms: number) => {
      now += ms
    },
    now: () => now
  }
}

/** In-memory OAuth core (as the HTTP tests will use it), optionally on a fake clock. */
export const memoryRuntime = (options: {
  readonly clients?: ReadonlyArray<CreateClientInput | CreateKeyClientInput>
  readonly maxFailuresPerMinute?: number
  readonly clock?: ReturnType<typeof makeFakeClock>
  readonly env?: Env
  /** Where jwks_uri may be fetched from, and how names resolve. */
  readonly jwks?: Parameters<typeof RemoteJwks.layerTest>[0]
} = {}) => {
  const core = OAuth.layerTest(options).pipe(Layer.provideMerge(appConfigLayer(options.env)))
  return ManagedRuntime.make(options.clock === undefined ? core : core.pipe(Layer.provideMerge(options.clock.layer)))
}

/** File-backed OAuth core on `dataDir`, like production, with OAUTH_* variables from `env`. */
export const fileRuntime = (dataDir: string, env: Env = {}, clock?: ReturnType<typeof makeFakeClock>) => {
  const core = OAuth.layer.pipe(
    Layer.provideMerge(AppConfig.layer),
    Layer.provide(upstreamHttp),
    Layer.provide(configFrom(testEnv({ DATA_DIR: dataDir, ...env })))
  )
  return ManagedRuntime.make(clock === undefined ? core : core.pipe(Layer.provideMerge(clock.layer)))
}

/** oauth4webapi's form encoding (it escapes even `-_.!~*'()`), for Basic credentials. */
const formEncode = (s: string): string =>
  encodeURIComponent(s).replace(/(?:[-_.!~*'()]|%20)/g, (c) => (c === "%20" ? "+" : `%${c.charCodeAt(0).toString(16).toUpperCase()}`))

export const basic = (id: string, secret: string, encode: (s: string) => string = formEncode): string =>
  `Basic ${Buffer.from(`${encode(id)}:${encode(secret)}`, "utf8").toString("base64")}`

export const FORM = "application/x-www-form-urlencoded"

export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Polls `check` until it is true or `timeoutMs` passes (hot-reload tests). */
export const eventually = async (check: () => Promise<boolean>, timeoutMs = 3000): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return true
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * The wall clock moved past a file's reload interval (ReloadingFile paces its checks by Date.now, 1 s): the next read
 * checks the file again, without a second's sleep. Only Date is faked, until the test ends.
 */
export const pastReloadInterval = () => {
  vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 1_100 })
  onTestFinished(() => void vi.useRealTimers())
}
