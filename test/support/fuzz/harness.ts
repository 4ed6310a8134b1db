/**
 * The fuzz target: the real HTTP application over a socket (test/support/app.ts, in-memory fakes
 * behind it), its served OpenAPI document loaded as the oracle, and the fixed fast-check parameters.
 *
 * Seed and run counts are fixed so CI is reproducible and fast. For a longer local hunt:
 *   FUZZ_SEED=123 FUZZ_RUNS_FACTOR=10 npx vitest run test/integration/fuzz
 */
import { expect } from "vitest"
import { startTestApp, type TestApp, testOAuth } from "../app.ts"
import { BASE } from "../problems.ts"
import { type RawRequest, type RawResponse, send, sendBytes } from "./http.ts"
import { type Exchange, violationsOf } from "./invariants.ts"
import { loadOpenApi, type OpenApiModel } from "./openapi.ts"

const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 20_261_122)
const RUNS_FACTOR = Number(process.env.FUZZ_RUNS_FACTOR ?? 1)

/** fast-check parameters: the fixed seed and a bounded number of runs. */
export const fuzzParams = (numRuns: number) => ({
  seed: FUZZ_SEED,
  numRuns: Math.max(1, Math.round(numRuns * RUNS_FACTOR)),
  // Shrinking over HTTP can take minutes; the counterexample printed is the generated one.
  endOnFailure: true
})

export interface FuzzTarget {
  readonly app: TestApp
  readonly model: OpenApiModel
  readonly publicBaseUrl: string
  /** Sends one request and returns the answer with its invariant violations. */
  readonly exchange: (req: RawRequest & { readonly parserMayRefuse?: boolean }) => Promise<Checked>
  /** Writes raw bytes; `method` and `target` say what the bytes request, for the oracle. */
  readonly exchangeBytes: (
    bytes: Buffer | string,
    what: { readonly method: string; readonly target: string; readonly parserMayRefuse?: boolean }
  ) => Promise<Checked>
  readonly close: () => Promise<void>
}

export interface Checked {
  readonly response: RawResponse
  readonly violations: ReadonlyArray<string>
}

const describeRequest = (req: RawRequest) =>
  [
    `${req.method} ${req.path}`,
    ...(req.headers ?? []).map(([n, v]) => `${n}: ${v}`),
    "",
    req.body === undefined ? "" : Buffer.isBuffer(req.body) ? req.body.toString("latin1") : req.body
  ].join("\n")

export const startFuzzTarget = async (options: Parameters<typeof startTestApp>[0] = {}): Promise<FuzzTarget> => {
  // Failure limiting of the token endpoint would turn most fuzzed token requests into 429s.
  const app = await startTestApp({ oauth: testOAuth({ maxFailuresPerMinute: 10_000 }), ...options })
  const doc = await (await fetch(`${app.url}/openapi.json`)).json()
  const model = loadOpenApi(doc)
  const check = (exchange: Exchange): Checked => ({
    response: exchange.response,
    violations: violationsOf(model, BASE, exchange)
  })
  return {
    app,
    model,
    publicBaseUrl: BASE,
    exchange: async (req) => {
      const response = await send(app.url, req)
      return check({
        method: req.method,
        target: req.path,
        sent: describeRequest(req),
        response,
        ...(req.parserMayRefuse === undefined ? {} : { parserMayRefuse: req.parserMayRefuse })
      })
    },
    exchangeBytes: async (bytes, what) => {
      const response = await sendBytes(app.url, bytes)
      return check({ ...what, sent: Buffer.from(bytes).toString("latin1"), response })
    },
    close: () => app.close()
  }
}

/** Fails with the request and every violation, so a fuzz counterexample is readable in CI. */
export const expectNoViolations = (checked: Checked, context: string) => {
  if (checked.violations.length === 0) return
  expect.fail(
    `${context}\n→ ${checked.response.status} ${checked.response.headers["content-type"] ?? ""}\n` +
      `${checked.response.text.slice(0, 400)}\nviolations:\n - ${checked.violations.join("\n - ")}`
  )
}
