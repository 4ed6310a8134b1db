/** Constants and small helpers shared by the benchmark's modules (test/bench/bench.ts). */
import { existsSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

export const HOST = "127.0.0.1"
export const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)))
export const NODE = existsSync(join(ROOT, "node_modules/.bin/node")) ? join(ROOT, "node_modules/.bin/node") : process.execPath
/** Rate limits given to the service and to the Fastify peer: the limiter runs, nobody is refused. */
export const HIGH_LIMIT = 1_000_000_000
/** C8: request bodies over 16 KiB are 413. */
export const MAX_BODY_BYTES = 16 * 1024

/** A failure the benchmark reports as a message, without a stack. */
export class BenchError extends Error {}
export function fail(message: string): never {
  throw new BenchError(message)
}

export const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))
export const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits
export const mib = (kib: number) => round(kib / 1024, 1)
export const pad = (s: string, n: number) => (s.length >= n ? s : s + " ".repeat(n - s.length))
export const lpad = (s: string, n: number) => (s.length >= n ? s : " ".repeat(n - s.length) + s)
export const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US")
