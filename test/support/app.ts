/**
 * The application served over real HTTP with in-memory fakes behind it (Layers swapped, nothing
 * patched): the services of src/services.ts, each replaced by a test's stand-in (`testServices`), any
 * of which a test replaces again in one line, e.g. `startTestApp({ rates: RatesProvider.layerTest })`.
 */
import type { PriceHubTiming } from "../../src/prices/PriceHub.ts"
import { Layer } from "effect"
import { AppConfig } from "../../src/config/AppConfig.ts"
import type { Env } from "./config.ts"
import { AccessLog, type AccessLogEntry } from "../../src/observability/AccessLog.ts"
import type { HttpLimits } from "../../src/http/EdgeServer.ts"
import { RequestCounter } from "../../src/http/rateLimit.ts"
import { NewsletterMemory } from "../../src/newsletter/memory.ts"
import type { JtiStore } from "../../src/oauth/assertion/JtiStore.ts"
import type { CreateClientInput, CreateKeyClientInput } from "../../src/oauth/ClientRegistry.ts"
import { OAuth } from "../../src/oauth/OAuth.ts"
import { RatesProvider } from "../../src/rates/RatesProvider.ts"
import type { AppServiceLayers } from "../../src/services.ts"
import { configFrom } from "./config.ts"
import { serve, type TestServer } from "./server.ts"

export const testClients: ReadonlyArray<CreateClientInput> = [
  { name: "all scopes", clientId: "svc-all", secret: "secret-all", scopes: ["health:read", "rates:read", "subscriptions:write"] },
  { name: "health only", clientId: "svc-health", secret: "secret-health", scopes: ["health:read"] }
]

/** The OAuth core in memory with `testClients` and the `clients` given. */
export const testOAuth = <E = never, R = never>(options: {
  /** More clients (private_key_jwt ones among them) beside `testClients`. */
  readonly clients?: ReadonlyArray<CreateClientInput | CreateKeyClientInput>
  /** Failed token requests allowed per minute and key (default 10, as in production). */
  readonly maxFailuresPerMinute?: number
  /** Where used client assertions are remembered (default: memory). */
  readonly jtiStore?: Layer.Layer<JtiStore, E, R>
} = {}) =>
  OAuth.layerTest({
    clients: [...testClients, ...(options.clients ?? [])],
    ...(options.maxFailuresPerMinute === undefined ? {} : { maxFailuresPerMinute: options.maxFailuresPerMinute }),
    ...(options.jtiStore === undefined ? {} : { jtiStore: options.jtiStore })
  })

/**
 * Every service of the app as a test has it: configuration from `env` over the tests' defaults (limits out
 * of the way unless a test sets them: rate-limit.test.ts does), rates and newsletter fakes, OAuth in memory,
 * counts in memory, no access log, nothing swept at start-up.
 */
export const testServices = (env: Env = {}): AppServiceLayers => ({
  config: AppConfig.layer.pipe(Layer.provide(configFrom({
    PUBLIC_BASE_URL: "https://api.example.test",
    RATE_LIMIT_RATES_PER_MIN: "100000",
    RATE_LIMIT_SUBSCRIBE_PER_MIN: "100000",
    ...env
  }))),
  rates: RatesProvider.layerTest,
  newsletter: NewsletterMemory.layer,
  oauth: testOAuth(),
  requestCounter: RequestCounter.layerMemory,
  accessLog: AccessLog.silent,
  startUp: Layer.empty
})

export interface TestApp extends TestServer {
  /** The access log's lines (unless the test gave its own `accessLog`). */
  readonly logs: Array<AccessLogEntry>
}

export const startTestApp = async (options: Partial<Omit<AppServiceLayers, "config">> & {
  /** Variables over the tests' defaults (`testServices`). */
  readonly env?: Env
  /** Request deadlines of the server (default: C8's). */
  readonly limits?: Partial<HttpLimits>
  /** The price hub's rounds and bounds (default: production's). */
  readonly priceHub?: PriceHubTiming
} = {}): Promise<TestApp> => {
  const logs: Array<AccessLogEntry> = []
  const { env, limits, priceHub, ...services } = options
  const server = await serve({ ...testServices(env), accessLog: AccessLog.capture(logs), ...services }, limits, priceHub)
  return { ...server, logs }
}

/** Basic credentials as RFC 6749 §2.3.1 wants them: each half form-urlencoded, then base64. */
export const basic = (id: string, secret: string) =>
  "Basic " + Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")

export const tokenFor = async (app: TestServer, id: string, secret: string, scope?: string) => {
  const res = await fetch(`${app.url}/oauth/token`, {
    method: "POST",
    headers: { authorization: basic(id, secret), "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", ...(scope ? { scope } : {}) })
  })
  if (res.status !== 200) throw new Error(`token request failed: ${res.status} ${await res.text()}`)
  return ((await res.json()) as { access_token: string }).access_token
}
